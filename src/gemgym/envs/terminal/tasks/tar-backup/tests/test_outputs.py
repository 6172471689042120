import tarfile


def names():
    with tarfile.open("/app/backup.tar.gz", "r:gz") as tar:
        return {m.name.rstrip("/") for m in tar.getmembers() if m.isfile()}


def test_files():
    assert names() == {
        "project/src/main.js",
        "project/src/util.js",
        "project/.env",
        "project/README.md",
    }
