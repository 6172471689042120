"""median() runs in a separate process; what it returned, and what it left of its input,
are compared here (the expected values never reach the agent's code)."""

import json
import subprocess

CASES = [[3, 1, 2], [4, 1, 3, 2], [5], [10, -2], [7, 7, 1, 9, 3, 2], [2.5, 1.5]]
PROGRAM = """
import json, sys
sys.path.insert(0, "/app")
from stats import median
out = []
for case in json.loads(sys.stdin.read()):
    out.append([median(case), case])
sys.stdout.write("\\n" + json.dumps(out))
"""


def run():
    done = subprocess.run(
        ["python3", "-c", PROGRAM],
        input=json.dumps(CASES),
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=20,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, "no results"
    out = json.loads(lines[-1])
    assert isinstance(out, list) and len(out) == len(CASES)
    return out


def test_medians():
    assert [m for m, _ in run()] == [2, 2.5, 5, 4, 5, 2.0]


def test_input_not_changed():
    assert [after for _, after in run()] == CASES
