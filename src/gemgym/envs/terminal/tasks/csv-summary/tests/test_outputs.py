from pathlib import Path

EXPECTED = ["region,total", "east,3493", "north,4155", "south,2838", "west,3615"]


def test_summary():
    assert Path("/app/summary.csv").read_text().split() == EXPECTED
