"""The episode engine: determinism at any concurrency and on every source, failures that stay
in their episode (with their stage), the policy's narrow view of the env, blocking envs off the
event loop, and warm-up before the first episode."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from gemgym.agents import OracleAgent, RandomAgent
from gemgym.episodes import (
    Action,
    ActRequest,
    AgentPolicy,
    Engine,
    EpisodeSpec,
    FunctionPolicy,
    is_success,
)
from gemgym.errors import ConfigError, GradingError, ModelUnavailableError, ToolError
from gemgym.vector import make_vec
from helpers.envs import CountingEnv
from helpers.extras import needs_module

ENV = "game:GuessTheNumber-v0-hard"


def _play(policy: Any, source: Any, n: int, **kw: Any) -> list[Any]:
    engine = Engine(policy, source, **kw)
    try:
        return asyncio.run(engine.run([EpisodeSpec(k, seed=100 + k) for k in range(n)]))
    finally:
        engine.close()


@pytest.mark.parametrize("concurrency", [1, 3, 16])
def test_same_specs_same_episodes_at_any_concurrency(concurrency: int) -> None:
    base = [e.to_dict() for e in _play(AgentPolicy(RandomAgent()), ENV, 12, concurrency=2)]
    eps = _play(AgentPolicy(RandomAgent()), ENV, 12, concurrency=concurrency)
    assert [e.to_dict() for e in eps] == base
    assert [e.index for e in eps] == list(range(12))
    assert all(e.done and not e.failed for e in eps)  # the env ended every one


@pytest.mark.parametrize("backend", ["sync", "thread", "process"])
def test_vector_sources_play_the_same_episodes(backend: str) -> None:
    base = [e.to_dict() for e in _play(AgentPolicy(OracleAgent()), ENV, 8, concurrency=3)]
    venv = make_vec(ENV, 3, backend=backend, autoreset_mode="disabled")
    try:
        eps = _play(AgentPolicy(OracleAgent()), venv, 8, concurrency=3)
    finally:
        venv.close()
    assert [e.to_dict() for e in eps] == base
    assert all(e.success for e in eps)


class _Breaks(CountingEnv):
    """Fails where told: reset with seed 103, step 2 with seed 105 (``kind`` of error)."""

    def __init__(self, kind: type[Exception] = RuntimeError) -> None:
        super().__init__(episode_length=4)
        self.kind = kind

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed == 103:
            raise RuntimeError("the reset broke")
        self.seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action: str) -> Any:
        if self.seed == 105 and self.t == 1:
            raise self.kind("the step broke")
        return super().step(action)


@pytest.mark.parametrize(
    ("kind", "stage"), [(RuntimeError, "step"), (ToolError, "tool"), (GradingError, "grade")]
)
def test_failures_stay_in_their_episode_with_their_stage(kind: type[Exception], stage: str) -> None:
    eps = _play(FunctionPolicy(lambda obs: ["x"] * len(obs)), lambda: _Breaks(kind), 8,
                concurrency=3)  # fmt: skip
    by_seed = {e.seed: e for e in eps}
    assert len(eps) == 8
    bad_reset, bad_step = by_seed[103], by_seed[105]
    assert (bad_reset.finish_reason, bad_reset.error_stage) == ("error", "reset")
    assert "the reset broke" in str(bad_reset.error) and bad_reset.turns == []
    assert (bad_step.finish_reason, bad_step.error_stage) == ("error", stage)
    assert "the step broke" in str(bad_step.error) and len(bad_step.turns) == 1
    assert not bad_step.success and bad_step.failed
    others = [e for s, e in by_seed.items() if s not in (103, 105)]
    assert all(e.finish_reason == "env_end" and e.length == 4 for e in others)


def test_a_batch_that_raises_fails_only_the_bad_request() -> None:
    def policy(views: list[str]) -> list[str]:
        if any(v.startswith("step 2") for v in views):
            raise ValueError("the model choked on step 2")
        return ["x"] * len(views)

    calls: list[int] = []

    def counted(views: list[str]) -> list[str]:
        calls.append(len(views))
        return policy(views)

    eps = _play(FunctionPolicy(counted), lambda: CountingEnv(3), 4, concurrency=4)
    # every episode reaches "step 2" at its third turn, alone after the split: each fails there
    assert all(e.error_stage == "model" and e.length == 2 for e in eps)
    assert "the model choked" in str(eps[0].error)
    assert 4 in calls and calls.count(1) >= 4  # the batch of 4, then each request alone

    def picky(views: list[str]) -> list[str]:
        if "start 0" in views:  # only one episode's request is bad
            raise ValueError("bad")
        return ["x"] * len(views)

    engine = Engine(FunctionPolicy(picky), lambda: CountingEnv(2), concurrency=4)
    specs = [EpisodeSpec(k, seed=k, options={"start": k}) for k in range(4)]
    eps = asyncio.run(engine.run(specs))
    engine.close()
    assert [e.failed for e in eps] == [True, False, False, False]


@pytest.mark.parametrize("exc", [ConfigError("bad setup"), ModelUnavailableError("no server")])
def test_a_setup_that_cannot_work_stops_the_run(exc: Exception) -> None:
    class Policy:
        async def act(self, request: ActRequest) -> Action:
            raise exc

    with pytest.raises(type(exc)):
        _play(Policy(), ENV, 4, concurrency=2)


def test_a_policy_reaches_only_the_expert_and_random_actions() -> None:
    seen: list[Any] = []

    class Policy:
        async def act(self, request: ActRequest) -> Action:
            seen.append(request.env.sample_random_action())
            with pytest.raises(ConfigError, match="expert_action"):
                request.env.call("close")
            return Action(request.env.expert_action())

    eps = _play(Policy(), ENV, 3, concurrency=2)
    assert all(e.success for e in eps) and seen
    assert not hasattr(ActRequest, "env_object")


def test_turn_cap_truncates() -> None:
    eps = _play(FunctionPolicy(lambda v: ["x"] * len(v)), lambda: CountingEnv(10), 3,
                concurrency=2, max_turns=4)  # fmt: skip
    assert all((e.finish_reason, e.truncation, e.length) == ("truncation", "max_turns", 4)
               for e in eps)  # fmt: skip
    assert not any(e.done for e in eps)
    with pytest.raises(ConfigError, match="max_turns"):
        Engine(FunctionPolicy(lambda v: v), ENV, max_turns=0)


class _Sleepy(CountingEnv):
    """Each step sleeps ``0.2`` s in ``step`` (declared blocking) or awaits it in ``astep``."""

    blocking_io = True

    def __init__(self) -> None:
        super().__init__(episode_length=2)

    def step(self, action: str) -> Any:
        time.sleep(0.2)
        return super().step(action)


class _AsyncSleepy(CountingEnv):
    def __init__(self) -> None:
        super().__init__(episode_length=2)

    async def astep(self, action: str) -> Any:
        await asyncio.sleep(0.2)
        return self._advance()


@pytest.mark.parametrize("env", [_Sleepy, _AsyncSleepy])
def test_slow_envs_do_not_serialise_episodes(env: type[CountingEnv]) -> None:
    class Policy:  # per-turn async: each episode goes on as soon as its env answers
        async def act(self, request: ActRequest) -> Action:
            return Action("x")

    t0 = time.perf_counter()
    eps = _play(Policy(), env, 64, concurrency=64)
    took = time.perf_counter() - t0
    assert len(eps) == 64 and all(e.length == 2 for e in eps)
    assert took < 64 * 2 * 0.2 / 8  # 25.6 s one after another; concurrently about 0.4 s


def test_blocking_envs_step_off_the_loop_and_warm_up_first() -> None:
    loop_thread: list[int] = []
    events: list[tuple[str, int]] = []

    class Env(CountingEnv):
        blocking_io = True

        def warmup(self) -> None:
            events.append(("warmup", threading.get_ident()))

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            events.append(("reset", threading.get_ident()))
            return super().reset(seed=seed, options=options)

        def step(self, action: str) -> Any:
            events.append(("step", threading.get_ident()))
            return super().step(action)

    class Policy:
        async def act(self, request: ActRequest) -> Action:
            loop_thread.append(threading.get_ident())
            return Action("x")

    _play(Policy(), lambda: Env(2), 4, concurrency=2)
    assert events[0][0] == "warmup"
    assert [k for k, _ in events].count("warmup") == 2  # once per env copy
    assert all(ident not in loop_thread for _, ident in events)


def test_success_rule_is_the_one_in_outcomes() -> None:
    assert is_success({"success": False}, True, 1.0) is False
    assert is_success({}, True, 0.5) is True
    assert is_success({}, False, 1.0) is False


def test_records_are_json_round_trips() -> None:
    from gemgym.episodes import Episode

    (ep,) = _play(AgentPolicy(OracleAgent()), ENV, 1, concurrency=1)
    back = Episode.from_dict(ep.to_dict(timings=True))
    assert back.to_dict(timings=True) == ep.to_dict(timings=True)
    assert back.turns[0].latency_s == ep.turns[0].latency_s and ep.wall_s > 0


def _views(requests: Sequence[ActRequest]) -> list[Any]:
    return [r.view for r in requests]


def test_the_collector_leaves_failed_episodes_out_unless_asked() -> None:
    from gemgym.rl import Collector
    from gemgym.vector import make_vector_env

    def venv() -> Any:
        return make_vector_env(env_fns=[_Breaks] * 3, autoreset_mode="disabled")

    with Collector(venv(), lambda obs: ["x"] * len(obs), seed=100) as col:
        batch = col.collect(8)  # seeds 100..107: 103 fails at reset, 105 at a step
    assert batch.errors == 2 and len(batch) == 6
    assert {e.seed for e in batch.episodes} == set(range(100, 108)) - {103, 105}
    assert len(col.records) == 8 and sum(e.failed for e in col.records) == 2
    with Collector(venv(), lambda obs: ["x"] * len(obs), seed=100, keep_errors=True) as col:
        kept = col.collect(8)
    assert (kept.errors, len(kept)) == (0, 8)


def test_the_trainer_flag_keeps_failed_episodes() -> None:
    needs_module("torch", "llm")
    import argparse

    from gemgym.cli.train import add_arguments, config_from_args
    from gemgym.rl.trainer import RLConfig

    assert RLConfig().keep_errors is False
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args([ENV, "--keep-errors", "--updates", "1"])
    assert config_from_args(args).rl.keep_errors
    assert not config_from_args(p.parse_args([ENV, "--updates", "1"])).rl.keep_errors
