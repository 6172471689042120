import os
import subprocess
import tempfile


def run(names):
    work = tempfile.mkdtemp()
    src = os.path.join(work, "my docs")
    os.mkdir(src)
    for name in names:
        with open(os.path.join(src, name), "w") as f:
            f.write(name)
    dest = os.path.join(work, "out dir")
    done = subprocess.run(
        ["bash", "/app/archive.sh", src, dest], capture_output=True, text=True, timeout=20
    )
    copied = sorted(os.listdir(dest)) if os.path.isdir(dest) else None
    return done.stdout.strip(), copied


def test_spaces():
    assert run(["a b.txt", "c.txt", "d.md"]) == ("2", ["a b.txt", "c.txt"])


def test_no_files():
    assert run(["x.md"]) == ("0", [])
