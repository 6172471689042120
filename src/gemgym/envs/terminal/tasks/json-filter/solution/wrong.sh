jq -r '.[] | select(.age > 30) | .name' /app/users.json | sort > /app/names.txt
