chmod +x /app/bin/*
chmod 640 /app/secret.txt
