find /app/data -maxdepth 1 -type f -size +1024c | sort > /app/large.txt
