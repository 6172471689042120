from pathlib import Path


def test_counts():
    assert Path("/app/status_counts.txt").read_text().splitlines() == [
        "200 202",
        "301 13",
        "304 38",
        "404 40",
        "500 7",
    ]
