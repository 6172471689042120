awk '!seen[$0]++' /app/words.txt > /app/unique.txt
