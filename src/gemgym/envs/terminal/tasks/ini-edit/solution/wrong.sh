sed -i 's/^port = .*/port = 8080/' /app/config.ini
