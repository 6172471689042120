"""The env I/O contract on the shipped envs: which declare ``blocking_io`` (so the episode engine
steps them on its own threads), the code env's warmup, and grader failures as GradingError."""

from __future__ import annotations

from typing import Any

import pytest

import gemgym
from gemgym.core import Env, blocks_loop
from gemgym.envs.code import CodeEnv
from gemgym.errors import GradingError, SandboxError
from gemgym.sandbox import Limits, RunRequest, RunResult, Sandbox
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.pool import PoolSandbox
from gemgym.wrappers.tools import python_tool_wrapper
from helpers.extras import needs_module

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

ADD = {
    "question": "Read two integers and print their sum.",
    "tests": {"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]},
}
SOLUTION = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


class BrokenSandbox(Sandbox):
    """A sandbox whose machinery fails on every run (not the program's fault)."""

    name = "broken"

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        raise SandboxError("the sandbox worker died")


def _make(env_id: str, **kwargs: Any) -> Env[str, str]:
    if env_id.startswith(("math:", "qa:")):
        kwargs.setdefault("dataset", "sample")
    return gemgym.make(env_id, **kwargs)


@pytest.mark.parametrize(
    ("env_id", "blocks"),
    [
        ("code:HumanEval", True),
        ("math:GSM8K", True),
        ("math:Math12K", True),
        ("terminal:count-errors", True),
        ("game:GuessTheNumber-v0-easy", False),
        ("qa:NaturalQuestions", False),  # exact match and F1 in microseconds
    ],
)
def test_shipped_envs_declare_whether_they_block(env_id: str, blocks: bool) -> None:
    env = _make(env_id)
    try:
        assert blocks_loop(env) is blocks
    finally:
        env.close()


def test_tools_make_a_light_env_block_and_a_blocking_env_stays_blocking() -> None:
    game = gemgym.make("game:GuessTheNumber-v0-easy", wrappers=[python_tool_wrapper()])
    math = _make("math:GSM8K", wrappers=[python_tool_wrapper()])
    assert blocks_loop(game) and blocks_loop(math)
    assert blocks_loop(game.spawn())


def test_reasoning_gym_and_openenv_envs_block() -> None:
    needs_module("reasoning_gym", "rg")
    assert blocks_loop(gemgym.make("rg:basic_arithmetic"))
    from gemgym.integrations.openenv import OpenEnvEnv

    assert OpenEnvEnv.blocking_io  # reset and step wait on the server


@needs_bwrap
def test_code_env_warmup_starts_its_sandbox_workers_once() -> None:
    sandbox = PoolSandbox(Limits(timeout=5), size=2)
    env = CodeEnv(dataset=[ADD], sandbox=sandbox)
    try:
        env.warmup()
        env.warmup()  # twice is fine
        assert sandbox._started == 2 and len(sandbox._idle) == 2
        env.reset(seed=0)
        assert env.step(SOLUTION)[1] == 1.0
        assert sandbox._started == 2  # grading used the warm workers
    finally:
        env.close()
        sandbox.close()
    assert sandbox._started == 0 and sandbox._idle == []


@needs_bwrap
def test_a_closed_code_envs_warmup_starts_nothing() -> None:
    sandbox = PoolSandbox(Limits(timeout=5), size=2)
    env = CodeEnv(dataset=[ADD], sandbox=sandbox)
    env.close()
    env.warmup()
    assert sandbox._started == 0
    sandbox.close()


@needs_bwrap
def test_the_shared_sandbox_is_warmed_for_code_envs() -> None:
    env = gemgym.make("code:HumanEval")
    env.warmup()
    code_env = env.unwrapped
    assert isinstance(code_env, CodeEnv)
    sandbox = code_env.sandbox
    assert isinstance(sandbox, PoolSandbox) and sandbox._started == sandbox.size
    env.close()


def test_a_failing_sandbox_fails_the_step_with_grading_error() -> None:
    env = CodeEnv(dataset=[ADD], sandbox=BrokenSandbox())
    env.reset(seed=0)
    with pytest.raises(GradingError, match="worker died") as caught:
        env.step(SOLUTION)
    assert isinstance(caught.value.__cause__, SandboxError)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("no code block")  # the model's bad answer: a reward
    assert reward < 0 and info["format_error"]
