find /app/data -type f -size +1024c | sort > /app/large.txt
