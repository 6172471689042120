from pathlib import Path


def test_list():
    assert Path("/app/large.txt").read_text().splitlines() == [
        "/app/data/big1.bin",
        "/app/data/x/y/deep.dat",
        "/app/data/z/just over.log",
    ]
