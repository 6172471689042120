import json
import subprocess

CASES = [[3, 1, 2], [4, 1, 3, 2], [5], [10, -2], [7, 7, 1, 9, 3, 2], [2.5, 1.5]]
PROGRAM = """
import json, sys
sys.path.insert(0, "/app")
from stats import median
out = []
for case in json.loads(sys.argv[1]):
    copy = list(case)
    out.append([median(copy), copy == case])
print(json.dumps(out))
"""


def run():
    done = subprocess.run(
        ["python3", "-c", PROGRAM, json.dumps(CASES)], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr[-300:]
    return json.loads(done.stdout)


def test_medians():
    assert [m for m, _ in run()] == [2, 2.5, 5, 4, 5, 2.0]


def test_input_not_changed():
    assert all(same for _, same in run())
