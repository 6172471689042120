awk '{print $9}' /app/access.log | sort | uniq -c | awk '{print $2, $1}' | sort -n > /app/status_counts.txt
