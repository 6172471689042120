cat > /app/wordfreq.py <<'PY'
import re
import sys
from collections import Counter

text = open(sys.argv[1], encoding="utf-8").read().lower()
counts = Counter(re.findall(r"[a-z]+", text))
for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: int(sys.argv[2])]:
    print(word, count)
PY
