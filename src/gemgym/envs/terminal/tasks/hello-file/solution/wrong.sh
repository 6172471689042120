echo 'hello world' > /app/hello.txt
