find /app/photos -type f -name '*.jpeg' -print0 | while IFS= read -r -d '' f; do mv "$f" "${f%.jpeg}.jpg"; done
