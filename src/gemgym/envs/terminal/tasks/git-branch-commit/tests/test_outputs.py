import subprocess


def git(*args):
    return subprocess.run(
        ["git", "-C", "/app/repo", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_main_unchanged():
    assert git("log", "--format=%s", "main").splitlines() == ["Initial commit"]


def test_feature_commit():
    assert git("log", "--format=%s", "feature").splitlines() == ["Add greeting", "Initial commit"]
    assert git("show", "feature:app.py") == 'print("v2")'
    assert git("show", "feature:greeting.txt") == "hello"


def test_clean_tree():
    assert git("status", "--porcelain") == ""
