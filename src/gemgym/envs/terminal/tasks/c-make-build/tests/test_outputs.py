import subprocess


def calc(*args):
    done = subprocess.run(["/app/calc/calc", *args], capture_output=True, text=True, timeout=10)
    return done.returncode, done.stdout.strip()


def test_make_builds_it():
    subprocess.run(["make", "clean"], cwd="/app/calc", capture_output=True, timeout=60)
    done = subprocess.run(["make"], cwd="/app/calc", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]


def test_is_a_program():
    with open("/app/calc/calc", "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_results():
    assert calc("2", "+", "3") == (0, "5")
    assert calc("7", "x", "6") == (0, "42")
    assert calc("9", "/", "2") == (0, "4")
    assert calc("1", "/", "0")[0] == 2
