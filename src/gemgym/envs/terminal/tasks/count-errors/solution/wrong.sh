grep -ci 'error' /app/logs/a.log > /app/error_count.txt
