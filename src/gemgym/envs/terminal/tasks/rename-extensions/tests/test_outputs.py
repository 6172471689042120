import os

EXPECTED = {
    "a.jpg": "photos/a.jpeg",
    "b.jpg": "photos/b.jpg",
    "2023/beach day.jpg": "photos/2023/beach day.jpeg",
    "2023/summer trip/sun set.jpg": "photos/2023/summer trip/sun set.jpeg",
    "2024/c.jpg": "photos/2024/c.jpeg",
    "2024/notes.txt": "photos/2024/notes.txt",
    "2024/d.JPEG.bak": "photos/2024/d.JPEG.bak",
}


def found():
    out = {}
    for root, _, files in os.walk("/app/photos"):
        for name in files:
            path = os.path.join(root, name)
            with open(path) as f:
                out[os.path.relpath(path, "/app/photos")] = f.read().strip()
    return out


def test_names():
    assert sorted(found()) == sorted(EXPECTED)


def test_contents_kept():
    assert found() == EXPECTED
