def slugify(title):
    """'Hello, World!' -> 'hello-world'"""
    return title.lower().replace(" ", "-")


def truncate(text, width):
    """Cut text to at most width characters, ending with '...' when it was cut."""
    if len(text) <= width:
        return text
    return text[:width] + "..."
