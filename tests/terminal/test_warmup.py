"""TerminalEnv.warmup: the first episode's sandbox starts before the first reset, which takes
it; closing after a warmup closes it; a closed env starts nothing."""

from __future__ import annotations

from typing import Any

import pytest

import gemgym
from gemgym.core import blocks_loop
from gemgym.envs.terminal.env import TerminalEnv
from gemgym.sandbox.bwrap import bwrap_available

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


def _env(**kwargs: Any) -> TerminalEnv:
    env = gemgym.make("terminal:count-errors", **kwargs).unwrapped
    assert isinstance(env, TerminalEnv)
    return env


def test_terminal_envs_block() -> None:
    assert blocks_loop(gemgym.make("terminal:count-errors"))


@needs_bwrap
def test_warmup_starts_the_first_sandbox_and_reset_takes_it() -> None:
    env = _env()
    try:
        env.warmup()
        spare = env._spares[""]
        assert spare.done()  # warmup waited until it ran
        session = spare.result()
        assert not session.closed
        env.warmup()  # twice is fine: still the same sandbox
        assert env._spares[""] is spare
        env.reset(seed=0)
        assert env._session is session
    finally:
        env.close()
    assert session.closed


@needs_bwrap
def test_close_after_warmup_closes_the_started_sandbox() -> None:
    env = _env()
    env.warmup()
    session = env._spares[""].result()
    env.close()
    assert session.closed and env._spares == {}


def test_a_closed_env_or_prestart_false_starts_nothing() -> None:
    env = _env()
    env.close()
    env.warmup()
    assert env._spares == {}
    lazy = _env(prestart=False)
    lazy.warmup()
    assert lazy._spares == {}
    lazy.close()
