"""Math envs' warmup: it starts the shared grading pool (once, from any number of threads), a
closed env starts nothing, and a grader that cannot start fails the step with GradingError."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

import pytest

import gemgym
from gemgym.envs.math import MathEnv
from gemgym.errors import GradingError
from gemgym.grading import math as grading_math, pool as pool_module
from gemgym.grading.pool import GradingPool, default_pool
from helpers.extras import needs_module

needs_module("math_verify", "math")


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _all_gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(autouse=True)
def no_cached_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every math-verify grading of a test goes to the pool (no verdict from earlier tests)."""
    monkeypatch.setattr(grading_math, "_VERDICTS", OrderedDict())


@pytest.fixture
def stopped_pool() -> GradingPool:
    """The process-wide pool, stopped, so that a test sees what starts it."""
    pool = default_pool()
    pool.close()
    assert not pool.ready and pool.pids() == []
    return pool


def test_warmup_starts_the_grading_pool_and_the_first_grading_reuses_it(
    stopped_pool: GradingPool,
) -> None:
    env = gemgym.make("math:GSM8K", dataset="sample")
    env.warmup()
    assert stopped_pool.ready
    pids = stopped_pool.pids()
    assert len(pids) == 2 and all(_alive(p) for p in pids)  # the template and one worker
    env.warmup()  # twice is fine: nothing new starts
    assert stopped_pool.pids() == pids
    math_env = MathEnv(dataset=[{"problem": "Simplify sqrt(75).", "answer": r"5\sqrt{3}"}])
    math_env.reset(seed=0)
    _, reward, *_, info = math_env.step(r"\boxed{\sqrt{75}}")
    assert (reward, info["grading"]) == (1.0, "math_verify")
    assert stopped_pool.pids() == pids  # graded by the warm worker: nothing was started
    env.close()
    math_env.close()
    stopped_pool.close()
    assert _all_gone(pids)


def test_concurrent_warmups_share_one_template_and_one_worker(stopped_pool: GradingPool) -> None:
    envs = [gemgym.make("math:GSM8K", dataset="sample") for _ in range(8)]
    errors: list[BaseException] = []

    def warm(env: gemgym.Env[str, str]) -> None:
        try:
            env.warmup()
            assert stopped_pool.ready  # each call returns once the pool is ready
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=warm, args=(e,)) for e in envs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    pids = stopped_pool.pids()
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    for env in envs:
        env.close()
    stopped_pool.close()
    assert _all_gone(pids)


def test_a_closed_envs_warmup_starts_nothing(stopped_pool: GradingPool) -> None:
    env = gemgym.make("math:GSM8K", dataset="sample")
    env.close()
    env.warmup()
    assert not stopped_pool.ready and stopped_pool.pids() == []


def test_a_private_pool_warm_up_is_idempotent_and_close_leaves_no_process() -> None:
    pool = GradingPool(max_workers=2)
    pool.warm_up()
    pool.warm_up()
    pids = pool.pids()
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    assert pool.verify("x^2+2x+1", "(x+1)^2", 5.0) is True
    pool.close()
    assert not pool.ready and pool.pids() == []
    assert _all_gone(pids)


def test_a_grader_that_cannot_start_fails_the_step_with_grading_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = GradingPool(max_workers=1)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the template exits
    monkeypatch.setattr(pool_module, "_POOL", broken)
    monkeypatch.setattr(pool_module, "_POOL_PID", os.getpid())
    env = MathEnv(dataset=[{"problem": "Simplify.", "answer": r"3\sqrt{7}"}])
    env.warmup()  # says nothing: the step says why
    env.reset(seed=0)
    with pytest.raises(GradingError, match="did not start"):
        env.step(r"\boxed{\sqrt{63}}")
    env.close()
    broken.close()
