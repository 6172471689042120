import subprocess
from pathlib import Path


def git(*args):
    return subprocess.run(
        ["git", "-C", "/app/repo", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_history_kept():
    subjects = git("log", "--format=%s").splitlines()
    assert subjects[-4:] == ["Add currency", "Add cart", "Tweak settings", "Add settings"]
    assert len(subjects) == 5


def test_debug_off_and_later_changes_kept():
    text = Path("/app/repo/settings.py").read_text()
    assert "DEBUG = False" in text and "DEBUG = True" not in text
    assert 'CURRENCY = "EUR"' in text
    assert Path("/app/repo/cart.py").is_file()


def test_committed():
    assert git("status", "--porcelain") == ""
