"""The functions are called in a separate process; their results are compared here.

Nothing about the expected values reaches the agent's code, and its exit status counts for
nothing (a textutil.py that exits 0 at import prints no results).
"""

import json
import subprocess

SLUGIFY = {
    "Hello, World!": "hello-world",
    "  Many   spaces  ": "many-spaces",
    "C++ & Rust: 2 languages": "c-rust-2-languages",
    "already-a-slug": "already-a-slug",
    "MiXeD 42 Case": "mixed-42-case",
}
TRUNCATE = [
    (["short", 10], "short"),
    (["abcdefghij", 8], "abcde..."),
    (["abcdef", 6], "abcdef"),
    (["x" * 50, 20], "x" * 17 + "..."),
    (["hello world", 11], "hello world"),
    (["hello world", 10], "hello w..."),
]
HARNESS = """
import json, sys
sys.path.insert(0, "/app/project")
from textutil import slugify, truncate
cases = json.loads(sys.stdin.read())
out = {"slugify": [slugify(t) for t in cases["slugify"]],
       "truncate": [truncate(*a) for a in cases["truncate"]]}
sys.stdout.write("\\n" + json.dumps(out))
"""


def results():
    cases = {"slugify": list(SLUGIFY), "truncate": [a for a, _ in TRUNCATE]}
    done = subprocess.run(
        ["python3", "-c", HARNESS],
        input=json.dumps(cases),
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, "no results"
    return json.loads(lines[-1])


def test_slugify():
    assert results()["slugify"] == list(SLUGIFY.values())


def test_truncate():
    assert results()["truncate"] == [want for _, want in TRUNCATE]


def test_visible_suite_untouched():
    with open("/app/project/test_textutil.py") as f:
        text = f.read()
    assert 'slugify("Hello, World!"), "hello-world"' in text
    assert 'truncate("abcdefghij", 8), "abcde..."' in text
