from pathlib import Path


def test_names():
    assert Path("/app/names.txt").read_text().split() == ["Liam", "Noah", "Zoe"]
