cd /app/repo
git log -p | grep '^+password=' | grep -v CHANGE_ME | head -1 | cut -d= -f2 > /app/password.txt
