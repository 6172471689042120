import subprocess

BUILT = []


def count(data):
    if not BUILT:  # rebuild from the source once: the binary must come from the fixed code
        subprocess.run(["make", "-B", "-C", "/app/wc"], capture_output=True, timeout=60)
        BUILT.append(True)
    done = subprocess.run(["/app/wc/wordcount"], input=data, capture_output=True, timeout=10)
    assert done.returncode == 0, done.stderr[-300:]
    return int(done.stdout)


def test_empty():
    assert count(b"") == 0


def test_exact_buffer_sizes():
    for n in (16, 32, 64, 1024):
        assert count(b"a" * n) == 1
        assert count((b"ab " * 400)[:n]) == len((b"ab " * 400)[:n].split())


def test_text():
    assert count(b"  hello   world\n\tagain ") == 3
