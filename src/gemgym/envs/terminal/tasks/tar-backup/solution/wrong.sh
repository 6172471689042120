cd /app && tar -czf backup.tar.gz --exclude='node_modules' project/*
