cd /app/repo
git checkout -b feature
git add -A
git commit -m 'Add greeting'
