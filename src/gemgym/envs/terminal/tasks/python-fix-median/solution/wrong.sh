cat > /app/stats.py <<'PY'
def median(values):
    values.sort()
    return values[len(values) // 2]
PY
