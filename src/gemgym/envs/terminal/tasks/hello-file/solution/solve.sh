echo 'Hello, world!' > /app/hello.txt
