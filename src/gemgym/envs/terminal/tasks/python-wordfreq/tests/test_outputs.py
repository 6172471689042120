import subprocess
import tempfile


def run(text, n):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    done = subprocess.run(
        ["python3", "/app/wordfreq.py", f.name, str(n)], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr[-300:]
    return done.stdout.splitlines()


def test_simple():
    assert run("b a b c b a", 2) == ["b 3", "a 2"]


def test_case_and_punctuation():
    assert run("The cat. the DOG, the cat!", 3) == ["the 3", "cat 2", "dog 1"]


def test_ties_alphabetical():
    assert run("pear apple fig", 3) == ["apple 1", "fig 1", "pear 1"]
