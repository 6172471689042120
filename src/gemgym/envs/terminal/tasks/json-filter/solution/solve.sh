jq -r '.[] | select(.active and .age > 30) | .name' /app/users.json | sort > /app/names.txt
