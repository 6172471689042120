from pathlib import Path


def test_count():
    assert Path("/app/error_count.txt").read_text().strip() == "15"
