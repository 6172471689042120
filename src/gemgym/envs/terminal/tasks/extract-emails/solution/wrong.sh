grep -oE '[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+' /app/contacts.txt | sort -u > /app/emails.txt
