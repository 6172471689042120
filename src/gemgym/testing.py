"""Conformance checks for env authors: :func:`check_env`.

Run it in your own tests on every env you write::

    from gemgym.testing import check_env
    check_env("game:GuessTheNumber-v0-easy")

It checks the API contract (return types), that the same seed gives the same episode under the
same actions (across two separate instances), the terminated/truncated semantics (never both
true, the episode ends), that ``close()`` is idempotent, that the env can be copied (pickled,
or ``spawn(same_state=True)``) mid-episode with the copy behaving like the original, and that bad
replies (empty, NUL bytes, a million-digit box, 2 MB of text, unclosed boxes, non-``str`` values)
are an observation and a reward with a bounded observation (:func:`check_bad_actions`, or
``check_env(..., check_bad=True)``).

This module holds only what env authors call; the envs and servers gemgym's own tests use
(``CountingEnv``, ``FaultyEnv``, a scripted chat server) live in the repository's
``tests/helpers`` and are not installed.
"""

from __future__ import annotations

import math
import pickle
import time
from collections.abc import Callable
from typing import Any

from gemgym.core import Env, MultimodalObservation, excerpt
from gemgym.errors import GemGymError

__all__ = [
    "MAX_OBS_GROWTH",
    "EnvCheckError",
    "bad_actions",
    "check_bad_actions",
    "check_env",
]


class EnvCheckError(GemGymError, AssertionError):
    """An env broke the gemgym API contract; the message says which rule."""


def _fail(msg: str) -> EnvCheckError:
    return EnvCheckError(msg)


def _is_observation(obs: Any) -> bool:
    if isinstance(obs, str | MultimodalObservation):
        return True
    if isinstance(obs, list):
        return all(isinstance(m, dict) and "role" in m and "content" in m for m in obs)
    return obs is not None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. numpy arrays: ambiguous truth value
        return pickle.dumps(a) == pickle.dumps(b)


def _check_result(result: Any, what: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """The checked ``(obs, reward, terminated, truncated, info)`` of a ``step``."""
    if not isinstance(result, tuple) or len(result) != 5:
        raise _fail(f"{what}: step() must return (obs, reward, terminated, truncated, info)")
    obs, reward, terminated, truncated, info = result
    if not isinstance(reward, int | float) or isinstance(reward, bool):
        try:
            reward = float(reward)
        except (TypeError, ValueError) as e:
            raise _fail(f"{what}: reward must be a number, got {type(reward).__name__}") from e
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise _fail(
            f"{what}: terminated and truncated must be bools, got "
            f"{type(terminated).__name__} and {type(truncated).__name__}"
        )
    if terminated and truncated:
        raise _fail(f"{what}: terminated and truncated are both true; set only one")
    if not isinstance(info, dict):
        raise _fail(f"{what}: step() info must be a dict, got {type(info).__name__}")
    if not _is_observation(obs):
        raise _fail(f"{what}: step() returned an observation of type {type(obs).__name__}")
    return obs, float(reward), terminated, truncated, info


def _play(
    env: Env[Any, Any], seed: int, actions: list[Any] | None, max_steps: int
) -> tuple[list[Any], list[Any]]:
    """Play one episode; returns (trace, actions). Actions are sampled when not given."""
    obs, info = env.reset(seed=seed)
    if not isinstance(info, dict):
        raise _fail(f"reset() must return (obs, info: dict); info is {type(info).__name__}")
    if not _is_observation(obs):
        raise _fail(f"reset() returned an observation of type {type(obs).__name__}")
    trace: list[Any] = [obs]
    used: list[Any] = []
    for t in range(max_steps):
        action = actions[t] if actions is not None else env.sample_random_action()
        used.append(action)
        obs, reward, terminated, truncated, info = _check_result(env.step(action), f"step {t}")
        trace.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            break
        if actions is not None and t + 1 >= len(actions):
            break
    return trace, used


# -- the bad-action sweep -----------------------------------------------------------------------
MAX_OBS_GROWTH = 10_000
"""The most characters an observation may grow by in one step of the bad-action sweep: a bad
reply is echoed at most as an excerpt (:data:`gemgym.core.ECHO_LIMIT` characters in the built-in
envs), so a 2 MB reply never reaches the next prompt."""

_BAD_ACTIONS: dict[str, object] | None = None


def bad_actions() -> dict[str, object]:
    """The replies of the bad-action sweep (:func:`check_bad_actions`), by name: empty and blank
    text, NUL bytes, a ``\\boxed{}`` of a million digits, 2 MB of text on one line and on many,
    nested and unclosed boxes, unclosed answer tags and code fences, and non-``str`` values
    (``None``, an int, bytes, a list, a dict). Built once per process (a few MB)."""
    global _BAD_ACTIONS
    if _BAD_ACTIONS is None:
        _BAD_ACTIONS = {
            "empty": "",
            "blank": " \n\t  \n ",
            "nul_bytes": "\x00" * 64 + "\\boxed{\x00}\x00",
            "boxed_million_digits": "\\boxed{" + "9" * 1_000_000 + "}",
            "text_2mb_one_line": "a" * 2_000_000,
            "text_2mb_lines": "the quick brown fox [jumps] over 12 lazy dogs\n" * 44_000,
            "boxed_text_2mb": "\\boxed{" + "word " * 400_000 + "}",
            "nested_boxes": "\\boxed{\\boxed{\\boxed{1}}} \\boxed{{{2}}}",
            "unclosed_boxes": "\\boxed{" * 100_000,
            "unclosed_tags": "<answer>```python\n[" * 50_000,
            "none": None,
            "int": 123,
            "bytes": b"\\boxed{1}",
            "list": ["\\boxed{1}"],
            "dict": {"role": "assistant", "content": "\\boxed{1}"},
        }
    return _BAD_ACTIONS


def _text_size(obs: Any) -> int:
    if isinstance(obs, str):
        return len(obs)
    if isinstance(obs, MultimodalObservation):
        return len(obs.text)
    if isinstance(obs, list):
        return sum(len(str(m.get("content", ""))) if isinstance(m, dict) else 0 for m in obs)
    return 0


def check_bad_actions(
    env: Env[Any, Any] | str,
    *,
    seed: int = 0,
    max_obs_growth: int = MAX_OBS_GROWTH,
    max_seconds: float = 20.0,
    actions: dict[str, object] | None = None,
) -> None:
    """Feed ``env`` every reply of :func:`bad_actions` (or ``actions``): each must give a valid
    ``(obs, reward, terminated, truncated, info)`` with a finite reward, never an exception,
    within ``max_seconds``, and the observation may grow by at most ``max_obs_growth``
    characters (an invalid reply is echoed as a bounded excerpt, never whole).

    One reset, then the replies in turn (a reset again whenever the episode ends), so a
    multi-turn env sees bad replies mid-episode too. The env is closed at the end when the
    check made it from an id.

    Raises:
        EnvCheckError: the first reply the env fails on, and how.
    """
    from gemgym.registry import make

    own = isinstance(env, str)
    if isinstance(env, str):
        env = make(env)
    try:
        obs, _ = env.reset(seed=seed)
        size = _text_size(obs)
        done = False
        for name, action in (actions if actions is not None else bad_actions()).items():
            if done:
                obs, _ = env.reset(seed=seed)
                size = _text_size(obs)
            started = time.monotonic()
            try:
                result = env.step(action)
            except Exception as e:
                raise _fail(
                    f"the bad action {name!r} raised {type(e).__name__}: {excerpt(str(e))}; a bad "
                    "reply must become an observation and a reward (a format error)"
                ) from e
            took = time.monotonic() - started
            if took > max_seconds:
                raise _fail(f"the bad action {name!r} took {took:.1f} s (limit {max_seconds:g} s)")
            obs, reward, terminated, truncated, _info = _check_result(result, f"action {name!r}")
            if not math.isfinite(reward):
                raise _fail(f"the bad action {name!r} got the reward {reward}; rewards are finite")
            new_size = _text_size(obs)
            if new_size > size + max_obs_growth:
                raise _fail(
                    f"after the bad action {name!r} the observation grew from {size} to "
                    f"{new_size} characters (at most {max_obs_growth} more): echo a bounded "
                    "excerpt of an invalid reply (gemgym.core.excerpt), not the reply"
                )
            size = new_size
            done = terminated or truncated
    finally:
        if own:
            env.close()


def check_env(
    env: Env[Any, Any] | str,
    *,
    seed: int = 0,
    max_steps: int = 500,
    make_copy: Callable[[], Env[Any, Any]] | None = None,
    check_random_action: bool = True,
    check_bad: bool = False,
) -> None:
    """Check that ``env`` (an instance or an id) follows the gemgym API contract.

    Args:
        env: the env to check (an id is made with :func:`gemgym.make`).
        seed: seed of the checked episodes.
        max_steps: longest episode played.
        make_copy: builds a second, independent instance for the determinism check
            (default: ``make(id)`` for ids, ``env.spawn()`` for instances).
        check_random_action: also require ``sample_random_action()`` to give actions the env
            parses (no ``info["format_error"]``).
        check_bad: also run the bad-action sweep (:func:`check_bad_actions`) on the env (off
            by default: a history wrapper such as ``ConcatHistory(include_action=True)`` repeats
            every reply by design; the test suite sweeps every registered id).

    Raises:
        EnvCheckError: the first rule broken, with what to fix.
    """
    from gemgym.registry import make

    if isinstance(env, str):
        env_id = env
        env = make(env_id)
        if make_copy is None:

            def make_copy() -> Env[Any, Any]:
                return make(env_id)

    if not isinstance(env, Env):
        raise _fail(f"expected a gemgym.Env, got {type(env).__name__}")
    other = make_copy() if make_copy is not None else env.spawn()
    try:
        # 1. determinism: same seed, same actions => same episode, in two instances.
        trace_a, actions = _play(env, seed, None, max_steps)
        trace_b, _ = _play(other, seed, actions, max_steps)
        if not _same(trace_a[0], trace_b[0]):
            raise _fail("reset(seed=s) gave different first observations in two instances")
        if not _same(trace_a, trace_b):
            raise _fail("the same seed and actions gave different episodes in two instances")
        trace_c, _ = _play(env, seed, actions, max_steps)
        if not _same(trace_a, trace_c):
            raise _fail("resetting the same instance with the same seed changed the episode")
        # 2. the random actions are well formed.
        if check_random_action:
            env.reset(seed=seed + 1)
            for _ in range(3):
                action = env.sample_random_action()
                _, _, te, tr, info = env.step(action)
                if info.get("format_error"):
                    raise _fail(
                        f"sample_random_action() gave {action!r}, which the env rejects as "
                        "badly formatted"
                    )
                if te or tr:
                    break
        # 3. copies mid-episode behave like the original.
        env.reset(seed=seed)
        if len(actions) > 1:
            env.step(actions[0])
        try:
            clone = pickle.loads(pickle.dumps(env))
        except Exception:
            clone = env.spawn(same_state=True)
        if len(actions) > 1:
            step_a = env.step(actions[1])
            step_b = clone.step(actions[1])
            if not _same(step_a[:4], step_b[:4]):
                raise _fail("a copy made mid-episode (pickle or spawn) diverged from the original")
        clone.close()
    finally:
        other.close()
    # 4. bad replies are an observation and a reward, and are not echoed whole.
    if check_bad:
        check_bad_actions(env, seed=seed)
    # 5. close is idempotent.
    env.close()
    env.close()
