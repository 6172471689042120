"""``gem.utils.debug``: run an episode and print every step (GEM's debugging helpers).

``run_and_print_episode_with_random_selection`` is the name GEM's ``tests/test_env/test_game.py``
imports; GEM renamed it ``run_and_print_episode_with_selective_step``. Both names work here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np

__all__ = [
    "ppprint",
    "run_and_print_episode",
    "run_and_print_episode_async",
    "run_and_print_episode_with_random_selection",
    "run_and_print_episode_with_selective_step",
]


def ppprint(x: Any) -> None:
    """Pretty-print ``x``; a list or tuple item by item."""
    if isinstance(x, list | tuple):
        for i, item in enumerate(x):
            print("-" * 5, f"{i + 1}/{len(x)}:")
            pprint(item)
            print("")
    else:
        pprint(x)


def _section(title: str, value: Any) -> None:
    print("-" * 10, title, "-" * 10)
    ppprint(value)


def _done(terminated: Any, truncated: Any) -> bool:
    done = np.logical_or(terminated, truncated)
    return bool(np.all(done))


def _report(step: int, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any) -> None:
    print("=" * 30)
    print(f"Step {step}")
    _section("observation", obs)
    _section("action", action)
    _section("reward", reward)
    print("terminated: ", terminated, "truncated: ", truncated)
    print("=" * 30)


def run_and_print_episode(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """Reset ``env`` and step it with ``policy(obs)``, printing each step, until the episode
    ends (all envs of a vector env) or ``max_steps``."""
    start = time.time()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        _report(step, obs, action, reward, terminated, truncated)
        obs = next_obs
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


def run_and_print_episode_with_selective_step(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """As :func:`run_and_print_episode` for a vector env, stepping a random half of the envs
    each time (a dict of actions)."""
    start = time.time()
    rng = random.Random()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        actions = policy(obs)
        chosen: dict[int, Any] = {}
        while not chosen:
            chosen = {i: a for i, a in enumerate(actions) if rng.random() > 0.5}
        next_obs, reward, terminated, truncated, _ = env.step(chosen)
        _report(step, obs, chosen, reward, terminated, truncated)
        obs = next_obs
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


run_and_print_episode_with_random_selection = run_and_print_episode_with_selective_step


async def run_and_print_episode_async(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """:func:`run_and_print_episode` for an env whose ``reset``/``step`` are coroutines."""
    start = time.time()
    obs, _ = await env.reset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = await env.step(action)
        _report(step, obs, action, reward, terminated, truncated)
        obs = next_obs
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")
