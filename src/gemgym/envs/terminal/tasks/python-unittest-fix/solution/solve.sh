cat > /app/project/textutil.py <<'PY'
import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'"""
    return "-".join(re.findall(r"[a-z0-9]+", title.lower()))


def truncate(text, width):
    """Cut text to at most width characters, ending with '...' when it was cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 3)] + "..."
PY
