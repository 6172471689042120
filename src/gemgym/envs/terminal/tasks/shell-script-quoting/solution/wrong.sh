sed -i 's/mkdir -p $dest/mkdir -p "$dest"/' /app/archive.sh
