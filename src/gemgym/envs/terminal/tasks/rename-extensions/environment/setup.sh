mkdir -p "photos/2023/summer trip" photos/2024
for p in "photos/a.jpeg" "photos/b.jpg" "photos/2023/beach day.jpeg" "photos/2023/summer trip/sun set.jpeg" "photos/2024/c.jpeg" "photos/2024/notes.txt" "photos/2024/d.JPEG.bak"; do
  echo "$p" > "$p"
done
