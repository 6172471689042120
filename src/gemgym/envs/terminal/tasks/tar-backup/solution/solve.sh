cd /app && tar -czf backup.tar.gz --exclude='*.log' --exclude='node_modules' project
