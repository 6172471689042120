"""Code envs: GEM's rules (last code block, −0.1 without one), stdio and function-call tests."""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.envs.code import CodeEnv, humaneval_items, last_code_block, outputs_match, parse_tests
from gemgym.envs.dataset import TERMINAL_STATE
from gemgym.errors import ConfigError, DatasetError
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.testing import check_env

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

SHORTEST_PATHS = {
    "question": "Read n and an n x n distance matrix (-1: no edge). Print all-pairs shortest "
    "distances (-1 when unreachable).",
    "tests": {
        "inputs": ["3\n0 4 -1\n-1 0 1\n2 -1 0\n", "2\n0 -1\n-1 0\n"],
        "outputs": ["0 4 5\n3 0 1\n2 6 0\n", "0 -1\n-1 0\n"],
    },
}
FLOYD = """
n = int(input())
INF = float('inf')
d = [[INF if x == -1 else x for x in map(int, input().split())] for _ in range(n)]
for k in range(n):
    for i in range(n):
        for j in range(n):
            if d[i][k] + d[k][j] < d[i][j]:
                d[i][j] = d[i][k] + d[k][j]
for row in d:
    print(' '.join('-1' if x == INF else str(x) for x in row))
"""


def _answer(code: str, lang: str = "python") -> str:
    return f"Here is my solution:\n```{lang}\n{code}\n```\nDone."


def _play(env: CodeEnv, action: str, index: int = 0) -> tuple[float, dict[str, Any]]:
    obs, _ = env.reset(options={"index": index})
    assert isinstance(obs, str)
    next_obs, reward, terminated, truncated, info = env.step(action)
    assert (next_obs, terminated, truncated) == (TERMINAL_STATE, True, False)
    return reward, info


def test_correct_wrong_and_missing_code() -> None:
    env = CodeEnv(dataset=[SHORTEST_PATHS])
    obs, _ = env.reset(seed=0)
    assert obs.startswith("Read n") and "```python" in obs
    assert _play(env, _answer(FLOYD))[0] == 1.0
    reward, info = _play(env, _answer("print(0)"))
    assert reward == 0.0 and info["success"] is False and info["failure"].endswith("wrong answer")
    reward, info = _play(env, "I would use Floyd-Warshall.")
    assert reward == -0.1 and info["format_error"] is True


def test_the_last_code_block_counts() -> None:
    env = CodeEnv(dataset=[SHORTEST_PATHS])
    action = _answer("print(0)") + "\nActually:\n" + _answer(FLOYD, lang="")
    assert _play(env, action)[0] == 1.0
    assert last_code_block("```py\na\n``` x ```\nb\n```") == "b\n"
    assert last_code_block("```python print(1)```") is None


def test_fractional_reward_and_failures() -> None:
    half = "n = int(input())\nprint('0 4 5\\n3 0 1\\n2 6 0' if n == 3 else 'no')"
    all_or_nothing = CodeEnv(dataset=[SHORTEST_PATHS])
    assert _play(all_or_nothing, _answer(half))[0] == 0.0
    fractional = CodeEnv(dataset=[SHORTEST_PATHS], fractional_reward=True)
    reward, info = _play(fractional, _answer(half))
    assert reward == 0.5 and (info["passed"], info["total"]) == (1, 2)
    reward, info = _play(fractional, _answer("raise SystemExit(2)"))
    assert reward == 0.0 and "exit status 2" in info["failure"]


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_runaway_programs_fail_quickly() -> None:
    env = CodeEnv(dataset=[SHORTEST_PATHS], timeout=1.0)
    start = time.monotonic()
    reward, info = _play(env, _answer("while True:\n    pass"))
    assert reward == 0.0 and "timeout" in info["failure"]
    assert time.monotonic() - start < 2.5  # stops at the first failing batch
    reward, info = _play(env, _answer("import os\nprint(open('/etc/passwd').read())"))
    assert reward == 0.0 and "FileNotFoundError" in info["failure"]


def test_function_call_tests_cannot_be_skipped_with_exit() -> None:
    item = {
        "question": "Write add(a, b).",
        "tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
    }
    env = CodeEnv(dataset=[item])
    assert "```python" in env.reset(seed=0)[0]
    assert _play(env, _answer("def add(a, b):\n    return a + b"))[0] == 1.0
    assert _play(env, _answer("def add(a, b):\n    return a - b"))[0] == 0.0
    assert _play(env, _answer("import sys\nsys.exit(0)"))[0] == 0.0
    assert _play(env, _answer("import os\nos._exit(0)"))[0] == 0.0


@pytest.mark.parametrize(
    "tests",
    [
        {"inputs": ["2\n", "5\n"], "outputs": ["4\n", "25"]},
        json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4", "25\n"]}),  # TACO's input_output
        [{"input": "2\n", "output": "4"}, {"input": "5\n", "output": "25"}],
    ],
)
def test_stdio_test_formats(tests: Any) -> None:
    env = CodeEnv(dataset=[{"question": "Square n.", "tests": tests}])
    assert _play(env, _answer("print(int(input()) ** 2)"))[0] == 1.0
    assert _play(env, _answer("print(int(input()) * 2)"))[0] == 0.0


def test_call_based_tests() -> None:
    tests = json.dumps({"fn_name": "square", "inputs": [[2], [5]], "outputs": [[4], [25]]})
    env = CodeEnv(dataset=[{"question": "Write square(n).", "tests": tests}])
    assert _play(env, _answer("def square(n):\n    return n * n"))[0] == 1.0
    assert _play(env, _answer("def square(n):\n    return n"))[0] == 0.0


def test_unknown_tests_format() -> None:
    with pytest.raises(DatasetError, match="unknown tests format"):
        parse_tests({"tests": 42})
    with pytest.raises(DatasetError, match="numbers of inputs and outputs"):
        parse_tests({"tests": {"inputs": ["1"], "outputs": []}})


def test_output_comparison() -> None:
    assert outputs_match("1 2  \n3\n\n", "1 2\n3")
    assert not outputs_match("1  2", "1 2")
    assert not outputs_match("12", "1\n2")


def test_max_tests_keeps_the_longest_inputs() -> None:
    inputs = ["1\n", "22\n", "333\n", "4444\n"]
    item = {"question": "Echo.", "tests": {"inputs": inputs, "outputs": inputs}}
    env = CodeEnv(dataset=[item], max_tests=2)
    assert env._selected(parse_tests(item)) == [2, 3]
    reward, info = _play(env, _answer("s = input()\nprint(s if len(s) > 2 else 'x')"))
    assert reward == 1.0 and info["total"] == 2


def test_local_file_with_column_mapping(tmp_path: Path) -> None:
    path = tmp_path / "problems.jsonl"
    rows = [{"problem": "Square n.", "io": {"inputs": ["3\n"], "outputs": ["9"]}}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    env = CodeEnv(dataset=str(path), columns={"question": "problem", "tests": "io"})
    assert _play(env, _answer("print(int(input()) ** 2)"))[0] == 1.0


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="spec_id"):
        CodeEnv(spec_id="code:Nope")
    with pytest.raises(ConfigError, match="timeout"):
        CodeEnv(timeout=0)
    with pytest.raises(ConfigError, match="max_tests"):
        CodeEnv(max_tests=0)


def test_every_shipped_solution_passes() -> None:
    env = gemgym.make("code:StdioBasics")
    n = len(env.unwrapped)  # type: ignore[arg-type]
    assert n == 20
    for i in range(n):
        env.reset(options={"index": i})
        _, reward, *_ = env.step(env.expert_action())
        assert reward == 1.0, i


def test_humaneval_from_the_package() -> None:
    items = humaneval_items()
    assert len(items) == 164 and items[0]["task_id"] == "HumanEval/0"
    env = gemgym.make("code:HumanEval")
    obs, info = env.reset(seed=123)
    assert info["index"] == 0 and "def has_close_elements" in obs  # dataset order
    for index in (0, 32, 163):  # a sample; the benchmark grades all 164
        env.reset(options={"index": index})
        assert env.step(env.expert_action())[1] == 1.0
        env.reset(options={"index": index})
        assert env.step(env.sample_random_action())[1] == 0.0
    env.reset(options={"index": 2})
    body = "    return number % 1.0\n"  # a completion of the prompt's signature also works
    assert env.step(_answer(body))[1] == 1.0


@pytest.mark.slow
def test_all_humaneval_canonical_solutions_pass() -> None:
    env = gemgym.make("code:HumanEval")
    failed = []
    for index in range(164):
        env.reset(options={"index": index})
        if env.step(env.expert_action())[1] != 1.0:
            failed.append(index)
    assert failed == []


@pytest.mark.slow
def test_no_humaneval_problem_passes_a_stub_or_a_lying_result() -> None:
    """Every problem's tests run against the program's values: a stub, or an object whose
    ``__eq__`` always says yes, passes none of them."""
    env = gemgym.make("code:HumanEval")
    liar = (
        "class _Yes(list):\n    def __eq__(self, other):\n        return True\n"
        "    __ne__ = lambda self, other: False\n    __lt__ = __gt__ = __le__ = __ge__ = __eq__\n"
        "    def __abs__(self):\n        return 0\n    def __sub__(self, other):\n        return self\n"
        "    __rsub__ = __sub__\n    def __bool__(self):\n        return True\n"
    )
    passed = []
    for index in range(164):
        env.reset(options={"index": index})
        entry = env.unwrapped.item["entry_point"]  # type: ignore[attr-defined]
        for body in ("return None", "return _Yes()"):
            action = f"```python\n{liar}def {entry}(*args, **kwargs):\n    {body}\n```"
            if env.step(action)[1] != 0.0:
                passed.append((index, body))
            env.reset(options={"index": index})
    assert passed == []


def test_copies_and_pickles() -> None:
    env = gemgym.make("code:StdioBasics")
    env.reset(seed=3)
    clone = pickle.loads(pickle.dumps(env))
    action = env.expert_action()
    assert clone.step(action)[1] == env.step(action)[1] == 1.0


@pytest.mark.parametrize(
    "env_id",
    [
        "code:HumanEval",
        "code:StdioBasics",
        "code:CodeContest",
        "code:Taco8k",
        "code:PrimeIntellect15k",
        "eval:CodeContest",
    ],
)
def test_conformance(env_id: str) -> None:
    check_env(env_id)
