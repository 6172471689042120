cd /app/repo
bad=$(git log --format=%H --grep='Tweak settings')
git revert --no-edit "$bad"
