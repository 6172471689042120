cat > /app/wordfreq.py <<'PY'
import sys
from collections import Counter

counts = Counter(open(sys.argv[1]).read().split())
for word, count in counts.most_common(int(sys.argv[2])):
    print(word, count)
PY
