"""Every registered game turns any text into an observation and a reward, never an exception.

Property-based: hypothesis feeds arbitrary text (no box, garbage, wrong shape, out of range, very
long, unicode, many boxes) to every ``game:*`` id, including games added later.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gemgym
from gemgym.core import Env

# The template games' rules (a format error: -0.1 and the end); WikiGame keeps GEM's (-0.2, the
# episode goes on) and has its own tests (tests/games/test_wikigame.py, the bad-action sweep).
GAME_IDS = [i for i in gemgym.list_envs("game:*") if not i.startswith("game:WikiGame")]
_ENVS: dict[str, Env[Any, Any]] = {}

_WORDS = ["reveal", "flag", "up", "down", "left", "right", "A", "C", "crane", "E", "B"]
_numbers = st.integers(min_value=-5, max_value=10**12).map(str)
_token = st.one_of(_numbers, st.sampled_from(_WORDS), st.text(max_size=6))
_box_body = st.one_of(
    st.text(max_size=40),
    st.lists(_token, max_size=6).map(" ".join),
    st.lists(_numbers, max_size=6).map(", ".join),
    st.text(alphabet="0123456789 ,\t\n", max_size=60),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ", max_size=30),
)
_boxed = _box_body.map(lambda b: "\\boxed{" + b + "}")
_action = st.one_of(
    st.text(),
    _boxed,
    st.tuples(st.text(max_size=30), _boxed, st.text(max_size=30)).map("".join),
    st.lists(_boxed, min_size=2, max_size=8).map(" ".join),
    st.sampled_from(["", "\\boxed{}", "\\boxed{", "}", "\\boxed{{1}}", "\\boxed{\\boxed{1}}"]),
    st.text(alphabet="é漢字🙂\u200b\x00", max_size=20).map(lambda t: "\\boxed{" + t + "}"),
)


def _env(env_id: str) -> Env[Any, Any]:
    env = _ENVS.get(env_id)
    if env is None:
        env = _ENVS[env_id] = gemgym.make(env_id).unwrapped  # no OrderEnforcing: we reset ourselves
    return env


def _check_step(env: Env[Any, Any], action: str) -> bool:
    result = env.step(action)
    assert isinstance(result, tuple) and len(result) == 5
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, str) and obs
    assert isinstance(reward, float | int) and not isinstance(reward, bool)
    assert -0.1 <= reward <= 1.0 + 1e-9
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert not (terminated and truncated)
    assert isinstance(info, dict) and isinstance(info.get("suffix", ""), str)
    if info.get("format_error"):
        assert reward == pytest.approx(-0.1) and terminated
    if "\\boxed{" not in action:
        assert info.get("format_error") is True and terminated and reward == pytest.approx(-0.1)
    return terminated or truncated


@pytest.mark.parametrize("env_id", GAME_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(_action, min_size=1, max_size=4), seed=st.integers(0, 2**32))
def test_arbitrary_text_never_raises(env_id: str, actions: list[str], seed: int) -> None:
    env = _env(env_id)
    env.reset(seed=seed)
    for action in actions:
        if _check_step(env, action):
            env.reset(seed=seed)


@pytest.mark.parametrize("env_id", GAME_IDS)
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), noise=st.text(max_size=20))
def test_wrapped_random_actions_are_accepted(env_id: str, seed: int, noise: str) -> None:
    """A well-formed action inside chatter (and after a rejected box) is still parsed."""
    env = _env(env_id)
    env.reset(seed=seed)
    action = env.sample_random_action()
    _, _, _, _, info = env.step(f"{noise.replace('{', '(')} \\boxed{{???}} then {action}")
    assert not info.get("format_error")


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_huge_and_pathological_inputs_are_fast(env_id: str) -> None:
    env = _env(env_id)
    texts = [
        "x" * 1_000_000,
        "\\boxed{" + "9" * 100_000 + "}",
        "\\boxed{1" + " " * 100_000 + "x}",
        "\\boxed{A" + " " * 100_000 + "x}",
        "\\boxed{reveal" + " " * 100_000 + "1 x}",
        "\\boxed{a" + " a" * 50_000 + "!}",
        "\\boxed{reveal 1" + ", " * 50_000 + "}",
        "\\boxed{1 2}" * 20_000,
        "\\boxed{" * 50_000,
    ]
    for text in texts:
        env.reset(seed=0)
        start = time.perf_counter()
        _check_step(env, text)
        assert time.perf_counter() - start < 2.0, (
            f"{env_id} took too long on a {len(text)}-char action"
        )


def _game_patterns() -> list[Any]:
    import importlib
    import re

    found: list[Any] = []
    for name in ("crosswords", "hangman", "mastermind", "minesweeper", "word_search", "wordle"):
        module = importlib.import_module(f"gemgym.envs.games.{name}")
        found += [
            v
            for v in vars(module).values()
            if isinstance(v, re.Pattern) and v.pattern.startswith(r"\\boxed")
        ]
    return found


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(_action, st.sampled_from(["\\boxed{", "}", " ", "1", "a"])), max_size=6
    )
)
def test_last_box_fast_path_matches_the_full_scan(parts: list[str]) -> None:
    from gemgym.envs.games._common import last_boxed_match, last_match

    text = "".join(parts)
    for pattern in _game_patterns():
        fast, slow = last_boxed_match(text, pattern), last_match(text, pattern)
        assert (fast and (fast.span(), fast.groups())) == (slow and (slow.span(), slow.groups()))
