cd /app/repo
git reset --hard HEAD~3
