grep '^password=' /app/repo/db.conf | cut -d= -f2 > /app/password.txt
