"""The vector API on the sync, thread and process backends: seeding, autoreset, partial steps."""

from __future__ import annotations

import asyncio
import functools
import random
import time
from typing import Any

import numpy as np
import pytest

import gemgym
from gemgym.errors import ClosedError, ConfigError, ResetNeeded, VectorEnvError
from gemgym.testing import check_env
from gemgym.vector import AutoresetMode, VectorEnv, make_vector_env
from helpers.envs import CpuBoundEnv, FaultyEnv, register_bench_envs

register_bench_envs()  # bench:CpuBound-v0, bench:Sleep-v0

BACKENDS = ["sync", "thread", "process"]
GTN = "game:GuessTheNumber-v0-hard"
MIXED = [GTN, "game:GuessTheNumber-v0-easy", "bench:CpuBound-v0", GTN, "bench:Sleep-v0"]
MIXED_KW: list[dict[str, Any]] = [{}, {}, {"work_iters": 10}, {}, {"sleep_s": 0.0}]


def make_faulty(backend: str, n: int, episode_length: int, num_workers: int = 2) -> VectorEnv:
    """``n`` FaultyEnvs (they raise on the action ``"raise"``) on ``backend``."""
    opts: dict[str, Any] = {"num_workers": num_workers} if backend == "process" else {}
    fns = [functools.partial(FaultyEnv, episode_length=episode_length)] * n
    return make_vector_env(env_fns=fns, backend=backend, **opts)


def make_mixed(backend: str, mode: str, **opts: Any) -> VectorEnv:
    return make_vector_env(MIXED, MIXED_KW, backend=backend, autoreset_mode=mode, **opts)


def play(venv: VectorEnv, steps: int = 40, seed: int = 7) -> list[Any]:
    """A trace of full steps and partial (dict) steps with seeded actions."""
    rng = random.Random(seed)
    trace: list[Any] = [venv.reset(seed=seed)]
    for _ in range(steps):
        acts = [f"\\boxed{{{rng.randint(1, 50)}}}" if rng.random() > 0.05 else "?" for _ in MIXED]
        if rng.random() < 0.3:
            chosen = sorted(rng.sample(range(len(MIXED)), 2), reverse=True)
            out = venv.step({i: acts[i] for i in chosen})
        else:
            out = venv.step(acts)
        obs, rew, te, tr, infos = out
        assert not np.any(te & tr), "terminated and truncated are never both true"
        trace.append((obs, rew.tolist(), te.tolist(), tr.tolist(), infos))
    return trace


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_identical_results_across_backends(mode: str) -> None:
    traces = {}
    for backend in BACKENDS:
        with make_mixed(backend, mode, **({"num_workers": 2} if backend == "process" else {})) as v:
            assert v.backend == backend
            traces[backend] = play(v)
    assert traces["thread"] == traces["sync"]
    assert traces["process"] == traces["sync"]
    ended = sum(sum(t) for step in traces["sync"][1:] for t in (step[2], step[3]))
    assert ended >= 5, "the trace covers several autoresets"


def test_reset_seeds_env_i_with_seed_plus_i() -> None:
    with gemgym.make_vec(GTN, 4) as venv:
        obs, _ = venv.reset(seed=100)
        solo = [gemgym.make(GTN) for _ in range(4)]
        for i, env in enumerate(solo):
            env.reset(seed=100 + i)
        targets = [e.unwrapped.game_number for e in solo]  # type: ignore[attr-defined]
        assert [e.unwrapped.game_number for e in venv.envs] == targets  # type: ignore[attr-defined]
        assert len(set(targets)) > 1
        # one seed per env, and None to continue the stream
        venv.reset(seed=[100, None, 102, None])
        assert venv.envs[0].unwrapped.game_number == targets[0]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_env_options_and_reset_mask(backend: str) -> None:
    with gemgym.make_vec("bench:CpuBound-v0", 3, backend=backend, work_iters=1) as venv:
        obs, infos = venv.reset(seed=0, options=[{"start": 5}, None, {"start": 7}])
        assert obs[0] == "start 5" and obs[2] == "start 7" and obs[1] != "start 5"
        obs, _ = venv.reset(options={"start": 9, "reset_mask": [False, True, False]})
        assert obs == ["start 9"]
        with pytest.raises(VectorEnvError, match="option dicts"):
            venv.reset(options=[{}])


def test_work_iters_kwarg_reaches_every_backend() -> None:
    # env kwargs for all envs, through make_vec
    with gemgym.make_vec("bench:CpuBound-v0", 2, backend="thread", work_iters=3) as venv:
        assert [e.unwrapped.work_iters for e in venv.envs] == [3, 3]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_keeps_final_obs_and_info(backend: str) -> None:
    ids = ["bench:CpuBound-v0"] * 2
    kw = [{"episode_length": 2, "work_iters": 1}, {"episode_length": 3, "work_iters": 1}]
    with make_vector_env(ids, kw, backend=backend, autoreset_mode="same_step") as venv:
        venv.reset(seed=1)
        venv.step(["a", "a"])
        obs, rew, te, tr, infos = venv.step(["a", "a"])
        assert te.tolist() == [True, False]
        assert obs[0].startswith("start ")  # the new episode's first observation
        assert infos[0]["final_obs"].startswith("step 2:")
        assert infos[0]["final_info"] == {}
        assert "final_obs" not in infos[1]
        assert rew[0] > 0.0  # the terminal step's reward is kept


@pytest.mark.parametrize("backend", BACKENDS)
def test_next_step_resets_on_the_following_step(backend: str) -> None:
    ids = ["bench:CpuBound-v0"]
    kw = [{"episode_length": 1, "work_iters": 1}]
    with make_vector_env(ids, kw, backend=backend, autoreset_mode=AutoresetMode.NEXT_STEP) as v:
        v.reset(seed=1)
        obs, rew, te, tr, _ = v.step(["a"])
        assert te[0] and obs[0].startswith("step 1")
        obs, rew, te, tr, _ = v.step(["ignored"])
        assert obs[0].startswith("start ") and rew[0] == 0.0 and not te[0] and not tr[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_mode_needs_explicit_reset(backend: str) -> None:
    ids = ["bench:CpuBound-v0"] * 2
    kw = [{"episode_length": 1, "work_iters": 1}, {"episode_length": 5, "work_iters": 1}]
    opts: dict[str, Any] = {"num_workers": 1} if backend == "process" else {}
    with make_vector_env(ids, kw, backend=backend, autoreset_mode="Disabled", **opts) as venv:
        venv.reset(seed=3)
        _, _, te, _, _ = venv.step(["a", "a"])
        assert te.tolist() == [True, False]
        with pytest.raises(ResetNeeded):
            venv.step({0: "a"})
        with pytest.raises(ResetNeeded, match="env 0"):
            venv.step(["a", "a"])  # refused before env 1 (of the same worker) is stepped
        obs, _ = venv.reset(options={"reset_mask": np.array([True, False])})
        assert len(obs) == 1 and obs[0].startswith("start ")
        obs = venv.step({0: "a", 1: "a"})[0]
        assert obs[0].startswith("step 1") and obs[1].startswith("step 2")


def test_partial_step_returns_results_in_the_given_order() -> None:
    with gemgym.make_vec("bench:CpuBound-v0", 3, work_iters=1) as venv:
        venv.reset(seed=0)
        obs, rew, _, _, infos = venv.step({2: "a", 0: "b"})
        assert len(obs) == 2 and rew.shape == (2,) and len(infos) == 2
        assert [e.unwrapped.t for e in venv.envs] == [1, 0, 1]  # type: ignore[attr-defined]


def test_misuse_is_reported_clearly() -> None:
    with pytest.raises(ConfigError, match="unknown vector backend"):
        gemgym.make_vec(GTN, 2, backend="gpu")
    with pytest.raises(ConfigError, match="autoreset_mode"):
        gemgym.make_vec(GTN, 2, autoreset_mode="sometimes")
    with pytest.raises(ConfigError, match="num_workers"):
        gemgym.make_vec(GTN, 2, backend="process", backend_options={"num_worker": 2})
    venv = gemgym.make_vec(GTN, 2)
    venv.reset(seed=0)
    with pytest.raises(VectorEnvError, match="one action per env"):
        venv.step(["a"])
    with pytest.raises(VectorEnvError, match="out of range"):
        venv.step({5: "a"})
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(ClosedError):
        venv.step(["a", "a"])


def test_call_and_handles() -> None:
    with gemgym.make_vec(GTN, 3, backend="process", backend_options={"num_workers": 2}) as venv:
        venv.reset(seed=0)
        actions = venv.call("expert_action")
        assert len(actions) == 3 and all(a.startswith("\\boxed{") for a in actions)
        result = venv.handle(1).step(actions[1])
        assert len(result) == 5 and isinstance(result[1], float)
        obs, info = venv.handle(2).reset(seed=5)
        assert obs.startswith("You are playing Guess The Number")


def test_synthetic_envs_pass_the_conformance_checker() -> None:
    check_env("bench:CpuBound-v0")
    check_env(
        gemgym.make("bench:Sleep-v0", sleep_s=0.0),
        make_copy=lambda: gemgym.make("bench:Sleep-v0", sleep_s=0.0),
    )


def test_cpu_bound_env_does_fixed_work() -> None:
    env = CpuBoundEnv(work_iters=20_000)
    env.reset(seed=0)
    t0 = time.perf_counter()
    env.step("a")
    assert time.perf_counter() - t0 > 0.0005  # it really computes


# -- asyncio ---------------------------------------------------------------------------------------
SLEEP = 0.2


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_env_astep_overlaps_through_the_default_wrappers() -> None:
    envs = [gemgym.make("bench:Sleep-v0", sleep_s=SLEEP, max_episode_steps=5) for _ in range(16)]

    async def main() -> list[Any]:
        await asyncio.gather(*(e.areset(seed=i) for i, e in enumerate(envs)))
        return list(await asyncio.gather(*(e.astep("a") for e in envs)))

    t0 = time.perf_counter()
    results = asyncio.run(main())
    elapsed = time.perf_counter() - t0
    assert len(results) == 16 and all(r[0].startswith("step 1") for r in results)
    assert elapsed < 4 * SLEEP, f"16 sleeping envs took {elapsed:.2f}s; they did not overlap"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_vector_astep_overlaps_sleeping_envs(backend: str) -> None:
    n = 8
    with gemgym.make_vec("bench:Sleep-v0", n, backend=backend, sleep_s=SLEEP) as venv:
        venv.reset(seed=0)

        async def main() -> Any:
            return await venv.astep(["a"] * n)

        t0 = time.perf_counter()
        obs, rew, _, _, _ = asyncio.run(main())
        elapsed = time.perf_counter() - t0
    assert len(obs) == n and rew.shape == (n,)
    if backend != "process":  # 2 workers there: at least n/2 sleeps in a row (checked below)
        assert elapsed < 4 * SLEEP, f"{backend}: {elapsed:.2f}s for {n} concurrent sleeps"


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_thread_step_overlaps_sleeping_envs() -> None:
    with gemgym.make_vec("bench:Sleep-v0", 16, backend="thread", sleep_s=SLEEP) as venv:
        venv.reset(seed=0)
        t0 = time.perf_counter()
        venv.step(["a"] * 16)
        assert time.perf_counter() - t0 < 4 * SLEEP


@pytest.mark.parametrize("backend", BACKENDS)
def test_handles_step_independently_and_match_sync(backend: str) -> None:
    async def run(venv: VectorEnv) -> list[Any]:
        await venv.areset(seed=11)
        out = []
        for _ in range(3):
            # each env is served on its own; no barrier between them
            out.append(await asyncio.gather(*(venv.handle(i).astep("x") for i in range(4))))
        return out

    with gemgym.make_vec("bench:Sleep-v0", 4, backend="sync", sleep_s=0.0) as ref:
        expected = asyncio.run(run(ref))
    with gemgym.make_vec("bench:Sleep-v0", 4, backend=backend, sleep_s=0.0) as venv:
        assert asyncio.run(run(venv)) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_env_exception_is_raised_as_itself_and_the_batch_goes_on(backend: str) -> None:
    with make_faulty(backend, 4, episode_length=50) as venv:
        venv.reset(seed=0)
        with pytest.raises(ValueError, match="asked to raise"):
            venv.step(["ok", "raise", "ok", "ok"])
        with pytest.raises(ValueError, match="asked to raise"):
            asyncio.run(venv.astep(["ok", "ok", "raise", "ok"]))
        obs, rewards, terminated, truncated, infos = venv.step(["ok"] * 4)
        assert len(obs) == 4 and not truncated.any()
        assert all(isinstance(o, str) for o in obs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_reset_mask_and_empty_step_return_nothing(backend: str) -> None:
    opts: dict[str, Any] = {"num_workers": 2} if backend == "process" else {}
    with gemgym.make_vec(GTN, 3, backend=backend, backend_options=opts) as venv:
        venv.reset(seed=0)
        assert venv.reset(options={"reset_mask": [False] * 3}) == ([], [])
        obs, rewards, terminated, truncated, infos = venv.step({})
        assert obs == [] and infos == [] and rewards.shape == (0,) and terminated.shape == (0,)
        obs, rewards, _, _, _ = asyncio.run(venv.astep({}))
        assert obs == [] and rewards.shape == (0,)
        assert len(venv.step(["\\boxed{1}"] * 3)[0]) == 3  # still usable


def layers(env: Any) -> list[type]:
    """The types of an env's wrapper stack, outermost first."""
    out = [type(env)]
    while hasattr(env, "env"):
        env = env.env
        out.append(type(env))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_vector_env_keeps_the_order_of_calls(backend: str) -> None:
    """The envs are built without make's OrderEnforcing layer; the vector env keeps the order."""
    from gemgym.wrappers import OrderEnforcing

    opts: dict[str, Any] = {"num_workers": 2} if backend == "process" else {}
    ids, kw = ["bench:CpuBound-v0"] * 3, [{"work_iters": 1, "episode_length": 1}] * 3
    with make_vector_env(ids, kw, backend=backend, **opts) as venv:
        if backend != "process":
            assert all(OrderEnforcing not in layers(e) for e in venv.envs)  # type: ignore[attr-defined]
        with pytest.raises(ResetNeeded):
            venv.step(["a"] * 3)  # before any reset
        with pytest.raises(ResetNeeded, match="env 1"):
            venv.step({1: "a"})
        with pytest.raises(ResetNeeded):
            asyncio.run(venv.astep({2: "a"}))
        venv.reset(seed=0)
        for _ in range(3):  # every step ends every episode; SAME_STEP resets them
            _, _, te, _, infos = venv.step(["a"] * 3)
            assert te.all() and all(i["final_obs"].startswith("step 1:") for i in infos)
        # stepping or resetting the envs through call would go behind the vector env's back
        with pytest.raises(VectorEnvError, match=r"venv\.step"):
            venv.call("step", "a")
        with pytest.raises(VectorEnvError, match=r"venv\.reset"):
            venv.call("reset")
        assert venv.step(["a"] * 3)[2].all()  # nothing was stepped by the refused calls
        assert len(venv.call("sample_random_action")) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_only_the_envs_never_reset_are_refused(backend: str) -> None:
    """A reset mask resets some envs: those may step, the others are refused before any steps."""
    opts: dict[str, Any] = {"num_workers": 1} if backend == "process" else {}
    ids, kw = ["bench:CpuBound-v0"] * 3, [{"work_iters": 1, "episode_length": 5}] * 3
    with make_vector_env(ids, kw, backend=backend, **opts) as venv:
        venv.reset(seed=0, options={"reset_mask": [True, False, True]})
        assert venv.step({0: "a", 2: "a"})[0][1].startswith("step 1:")
        with pytest.raises(ResetNeeded, match="env 1"):
            venv.step(["a"] * 3)
        venv.reset(options={"reset_mask": [False, True, False]})
        obs = venv.step(["a"] * 3)[0]  # env 0 was not stepped by the refused batch
        assert [o.split(":")[0] for o in obs] == ["step 2", "step 1", "step 2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_env_error_resets_the_envs_that_ended_before_it(backend: str) -> None:
    """An env that ended before another env raised is reset, in every backend."""
    with make_faulty(backend, 3, episode_length=1, num_workers=1) as venv:
        venv.reset(seed=0)
        venv.step(["ok"] * 3)  # the hot path is in use
        with pytest.raises(ValueError, match="asked to raise"):
            venv.step(["ok", "raise", "ok"])
        obs, _, te, _, infos = venv.step(["ok"] * 3)
        assert te.all() and all(o.startswith("start ") for o in obs)
        # env 0 was reset after its episode ended in the failed batch: this is its first step
        assert [i["final_obs"].split(":")[0] for i in infos] == ["step 1"] * 3


class _FailingReset(CpuBoundEnv):
    """Its reset raises while ``fail_reset`` is set."""

    fail_reset = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if self.fail_reset:
            raise RuntimeError("reset failed")
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("backend", ["sync", "thread"])
@pytest.mark.parametrize("order_layer", [False, True])
def test_env_whose_autoreset_failed_needs_a_reset(backend: str, order_layer: bool) -> None:
    from gemgym.wrappers import OrderEnforcing

    fns = [functools.partial(_FailingReset, episode_length=1, work_iters=1)] * 2
    wrappers = [OrderEnforcing] if order_layer else None
    with make_vector_env(env_fns=fns, wrappers=wrappers, backend=backend) as venv:
        venv.reset(seed=0)
        venv.step(["a", "a"])  # the hot path is in use
        venv.envs[1].unwrapped.fail_reset = True  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="reset failed"):
            venv.step(["a", "a"])
        venv.envs[1].unwrapped.fail_reset = False  # type: ignore[attr-defined]
        with pytest.raises(ResetNeeded, match="env 1"):
            venv.step(["a", "a"])
        with pytest.raises(ResetNeeded, match="env 1"):
            venv.step({1: "a"})
        venv.reset()
        assert venv.step(["a", "a"])[2].tolist() == [True, True]
