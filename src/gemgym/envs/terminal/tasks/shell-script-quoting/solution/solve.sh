cat > /app/archive.sh <<'SH'
#!/bin/bash
src=$1
dest=$2
mkdir -p "$dest"
count=0
for f in "$src"/*.txt; do
    [ -e "$f" ] || continue
    cp "$f" "$dest/"
    count=$((count + 1))
done
echo "$count"
SH
chmod +x /app/archive.sh
