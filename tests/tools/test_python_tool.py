"""PythonTool: GEM's parsing and observation format, run in the real sandbox."""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator

import pytest

from gemgym.errors import ConfigError
from gemgym.sandbox import Limits
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.pool import PoolSandbox
from gemgym.tools.base import ToolCall
from gemgym.tools.python import PythonTool, parse_python_block

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


@pytest.mark.parametrize(
    ("action", "code", "raw"),
    [
        ("<python>print(1)</python> then more", "print(1)", "<python>print(1)</python>"),
        ("text ```python\nprint(2)\n``` after", "print(2)\n", "text ```python\nprint(2)\n```"),
        # earliest end wins
        (
            "```python\na=1\n``` <python>b=2</python>",
            "a=1\n",
            "```python\na=1\n```",
        ),
        ("<python>x</python>```python\ny\n```", "x", "<python>x</python>"),
        ("<python>a</python><python>b</python>", "a", "<python>a</python>"),
    ],
)
def test_parse(action: str, code: str, raw: str) -> None:
    call = PythonTool().parse(action)
    assert call is not None
    assert (call.tool, call.arguments, call.raw) == ("python", code, raw)


@pytest.mark.parametrize(
    "action", ["no code", "<python>unclosed", "```\nprint(1)\n```", "```js\nx\n```", ""]
)
def test_no_call(action: str) -> None:
    assert PythonTool().parse(action) is None
    assert parse_python_block(action) is None


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="timeout"):
        PythonTool(timeout=0)
    with pytest.raises(ConfigError, match="sandbox"):
        PythonTool(sandbox="bwrap")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pool() -> Iterator[PoolSandbox]:
    sb = PoolSandbox(Limits(timeout=10), size=1)
    yield sb
    sb.close()


def _run(tool: PythonTool, action: str) -> tuple[str, bool]:
    call = tool.parse(action)
    assert call is not None
    result = tool.execute(call)
    return result.observation, result.ok


@needs_bwrap
def test_observation_format(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool)
    assert _run(tool, "<python>print(1+1)</python>") == ("Code execution result: 2\n", True)
    obs, ok = _run(tool, "<python>print('a')\n1/0</python>")
    assert not ok
    assert obs.startswith("Code execution result: a\n\nTraceback (most recent call last):")
    assert obs.endswith("ZeroDivisionError: division by zero\n")


@needs_bwrap
def test_keep_error_last_line(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool, keep_error_last_line=True)
    obs, ok = _run(tool, "<python>print('a')\n1/0</python>")
    assert obs == "Code execution result: a\n\nZeroDivisionError: division by zero"
    assert not ok


@needs_bwrap
@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_timeout_is_the_one_given(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool, timeout=1)
    start = time.monotonic()
    obs, ok = _run(tool, "<python>while True: pass</python>")
    assert time.monotonic() - start < 1.8  # GEM ran 10 s whatever the tool's timeout
    assert not ok and obs.endswith("TimeoutError: execution timed out after 1 seconds")


@needs_bwrap
def test_each_call_is_fresh_by_default(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool)
    _run(tool, "<python>x = 5</python>")
    obs, ok = _run(tool, "<python>print(x)</python>")
    assert not ok and "NameError" in obs


@needs_bwrap
def test_persistent_interpreter(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool, persistent=True)
    assert "stay available" in tool.instructions()
    assert _run(tool, "<python>x = 5\nprint('defined')</python>") == (
        "Code execution result: defined\n",
        True,
    )
    _run(tool, "<python>y = undefined_name</python>")  # failed cells are not replayed
    assert _run(tool, "<python>def f():\n    return x * 2</python>")[1]
    assert _run(tool, "<python>print(f())</python>") == ("Code execution result: 10\n", True)
    tool.reset()
    obs, ok = _run(tool, "<python>print(x)</python>")
    assert not ok and "NameError" in obs


@needs_bwrap
def test_sandboxed(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool)
    obs, _ = _run(tool, "<python>print(open('/etc/passwd').read())</python>")
    assert "FileNotFoundError" in obs and "root:" not in obs


@needs_bwrap
def test_default_uses_the_shared_sandbox_and_pickles() -> None:
    tool = PythonTool(timeout=3)
    assert "Calls time out after 3 seconds" in tool.instructions()
    copy = pickle.loads(pickle.dumps(tool))
    assert copy.sandbox is tool.sandbox
    result = copy.execute(ToolCall("python", "print(3)", "<python>print(3)</python>"))
    assert result.observation == "Code execution result: 3\n" and result.ok
    assert result.info["exit_code"] == 0


@needs_bwrap
def test_observation_cut(pool: PoolSandbox) -> None:
    tool = PythonTool(sandbox=pool, max_output_chars=80)
    obs, _ = _run(tool, "<python>print('x' * 100)</python>")
    assert obs.startswith("Code execution result: xx") and obs.endswith("xx\n")
    assert "characters cut ...]" in obs and len(obs) <= 80


def test_parsing_is_the_regexes_in_linear_time() -> None:
    """The block the two regexes find, without their quadratic time on unclosed openers."""
    import random
    import re
    import time

    tag = re.compile(r"<python>(.*?)</python>", re.DOTALL)
    fence = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)

    def by_regex(action: str) -> tuple[str, int] | None:
        found = [m for m in (tag.search(action), fence.search(action)) if m is not None]
        if not found:
            return None
        first = min(found, key=lambda m: m.end())
        return first.group(1), first.end()

    rng = random.Random(0)
    parts = ["<python>", "</python>", "```python", "```", "\n", " ", "\t", "x", "python", "`"]
    for _ in range(20_000):
        action = "".join(rng.choice(parts) for _ in range(rng.randrange(12)))
        assert parse_python_block(action) == by_regex(action), action
    started = time.perf_counter()
    assert parse_python_block("```python " * 100_000 + "<python>" * 100_000) is None
    assert time.perf_counter() - started < 2.0
