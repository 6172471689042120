"""The program is built here from the sources (whatever binary the agent left is removed first),
then run on inputs it has not seen; its outputs are compared here. make's exit status alone
proves nothing."""

import glob
import os
import subprocess

BUILT = []


def build():
    if not BUILT:
        for path in ["/app/calc/calc", *glob.glob("/app/calc/*.o")]:
            if os.path.lexists(path):
                os.remove(path)
        done = subprocess.run(["make"], cwd="/app/calc", capture_output=True, text=True, timeout=60)
        BUILT.append(done.returncode)
    return BUILT[0]


def calc(*args):
    build()
    done = subprocess.run(["/app/calc/calc", *args], capture_output=True, text=True, timeout=10)
    return done.returncode, done.stdout.strip()


def test_make_builds_it():
    assert build() == 0
    with open("/app/calc/calc", "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_results():
    assert calc("2", "+", "3") == (0, "5")
    assert calc("7", "x", "6") == (0, "42")
    assert calc("9", "/", "2") == (0, "4")
    assert calc("-12", "-", "30") == (0, "-42")
    assert calc("123456", "x", "1000") == (0, "123456000")
    assert calc("1", "/", "0")[0] == 2
    assert calc("1", "%", "2")[0] == 2
