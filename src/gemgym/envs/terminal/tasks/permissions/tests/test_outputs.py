import os
import stat


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_scripts_executable():
    for name in ("one.sh", "two.sh"):
        assert mode(f"/app/bin/{name}") & 0o111 == 0o111


def test_readme_not_executable():
    assert mode("/app/bin/README") & 0o111 == 0


def test_secret_private():
    assert mode("/app/secret.txt") == 0o600
