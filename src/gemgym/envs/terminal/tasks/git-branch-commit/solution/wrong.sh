cd /app/repo
git add -A
git commit -m 'Add greeting'
git branch feature
