from pathlib import Path


def test_unique_in_order():
    assert Path("/app/unique.txt").read_text().split() == [
        "pear",
        "apple",
        "fig",
        "kiwi",
        "banana",
        "cherry",
    ]
