awk '{print $9}' /app/access.log | sort | uniq -c | sort -rn | awk '{print $2, $1}' > /app/status_counts.txt
