"""``gemgym eval``'s runner on the episode engine, through its Python API (no HTTP): how each
episode ended, failures with their stage, per-episode policy state and cost, request seeds,
blocking envs off the event loop, and dataset levels as the difficulty."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.episodes import Action, ActRequest, derive_seed
from gemgym.errors import AgentError
from gemgym.evaluation.results import RunDir
from gemgym.evaluation.runner import EvalConfig, Runner, plan_tasks
from gemgym.evaluation.suites import EvalEnv
from helpers.envs import FaultyEnv, register_bench_envs
from helpers.extras import skip_without

register_bench_envs()  # bench:BlockingSleep-v0

FAULTY = "evaltest:Faulty-v0"
gemgym.register(FAULTY, FaultyEnv, kwargs={"episode_length": 2}, override=True)


class ScriptedAgent:
    """An eval policy whose action is ``script(request)``; it counts its turns in
    ``request.state`` and reports a fixed cost per turn."""

    name = "scripted"

    def __init__(self, script: Callable[[ActRequest], str]) -> None:
        self.script = script
        self.requests: list[ActRequest] = []

    async def act(self, request: ActRequest) -> Action:
        self.requests.append(request)
        await asyncio.sleep(0)  # let other episodes interleave
        request.state["turns"] = request.state.get("turns", 0) + 1
        action = self.script(request)
        return Action(action, prompt_tokens=10, completion_tokens=3, requests=2, latency_s=0.01)

    async def aclose(self) -> None:
        """Nothing to release."""


def _play(
    tmp_path: Path,
    agent: Any,
    envs: Sequence[EvalEnv],
    config: EvalConfig,
    *,
    alongside: Callable[[], Any] | None = None,
) -> list[dict[str, Any]]:
    run_dir = RunDir(tmp_path / "run")
    run_dir.path.mkdir(parents=True)
    run_dir.open_for_append()
    tasks, made = plan_tasks(envs, config)
    seen: list[dict[str, Any]] = []
    runner = Runner(agent, config, run_dir, on_record=seen.append, envs=made)

    async def go() -> int:
        if alongside is None:
            return await runner.run(tasks)
        side = asyncio.ensure_future(alongside())
        try:
            return await runner.run(tasks)
        finally:
            side.cancel()

    try:
        written = asyncio.run(go())
    finally:
        runner.close()
        run_dir.close()
    records = run_dir.read_records()
    assert written == len(tasks) == len(records) == len(seen)
    return sorted(records, key=lambda r: (r["env"], r["task"], r["sample"]))


def test_records_say_how_each_episode_ended(tmp_path: Path) -> None:
    config = EvalConfig(tasks=16, concurrency=4, max_turns=1)
    records = _play(tmp_path, RandomAgent(), [EvalEnv("game:GuessTheNumber-v0-easy")], config)
    cut = [r for r in records if r["cut"]]
    assert cut  # a random guess among 10 rarely wins at once
    for r in records:
        assert r["status"] == "ok" and r["error"] is None and r["error_stage"] is None
        assert r["turns"] == 1 and r["requests"] == 0  # the baseline makes no request
        if r["cut"]:
            assert (r["finish_reason"], r["truncation"]) == ("truncation", "max_turns")
            assert r["success"] is False
        else:
            assert (r["finish_reason"], r["truncation"]) == ("env_end", None)
            assert r["success"] is True
    # the oracle asks the env for its expert's move (through the capability the env grants)
    oracle = _play(
        tmp_path / "oracle",
        OracleAgent(),
        [EvalEnv("game:GuessTheNumber-v0-easy")],
        EvalConfig(tasks=8, concurrency=4),
    )
    assert all(r["success"] and r["finish_reason"] == "env_end" for r in oracle)


def test_failures_are_error_records_with_their_stage(tmp_path: Path) -> None:
    def script(request: ActRequest) -> str:
        task = request.episode.seed  # --seed 0: task t is seeded t
        if task == 1 and request.turn == 1:
            return "raise"  # FaultyEnv raises ValueError in step
        if task == 2:
            raise AgentError("the model gave up")
        return "fine"

    agent = ScriptedAgent(script)
    records = _play(tmp_path, agent, [EvalEnv(FAULTY)], EvalConfig(tasks=6, concurrency=2))
    by_task = {r["task"]: r for r in records}
    step, model = by_task[1], by_task[2]
    # the env raised on the reply: a scored failure of the env (issue 42), not an unscored error
    assert step["status"] == "env_error" and step["finish_reason"] == "error"
    assert step["success"] is False
    assert step["error_stage"] == "step"
    assert "FaultyEnv was asked to raise" in step["error"] and step["turns"] == 1
    assert (model["status"], model["error_stage"]) == ("error", "model")
    assert "the model gave up" in model["error"] and model["success"] is False
    for t in (0, 3, 4, 5):  # the others, some on a fresh copy of the env that raised
        r = by_task[t]
        assert (r["status"], r["finish_reason"], r["turns"]) == ("ok", "env_end", 2)


def test_policy_state_cost_and_request_seeds_are_per_episode(tmp_path: Path) -> None:
    agent = ScriptedAgent(lambda r: f"turn {r.state['turns']}")
    config = EvalConfig(tasks=5, n=2, concurrency=4, seed=7)
    records = _play(tmp_path, agent, [EvalEnv(FAULTY)], config)
    for r in records:
        assert [t["action"] for t in r["transitions"]] == ["turn 1", "turn 2"]
        assert r["usage"] == {"prompt_tokens": 20, "completion_tokens": 6}
        assert r["requests"] == 4 and abs(r["latency_s"] - 0.02) < 1e-9
        assert r["seed"] == 7 + r["task"]
    seeds = {(r.episode.group, r.episode.sample, r.turn): r.seed for r in agent.requests}
    for (task, sample, turn), got in seeds.items():  # a task's samples form its seed group
        assert got == derive_seed(7, FAULTY, task, sample, turn)
    assert len(set(seeds.values())) == len(seeds) == 5 * 2 * 2


def test_blocking_envs_step_off_the_event_loop(tmp_path: Path) -> None:
    gaps: list[float] = []

    async def heartbeat() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    env = EvalEnv("bench:BlockingSleep-v0", kwargs={"sleep_s": 0.3, "episode_length": 2})
    t0 = time.perf_counter()
    records = _play(
        tmp_path, RandomAgent(), [env], EvalConfig(tasks=8, concurrency=8), alongside=heartbeat
    )
    took = time.perf_counter() - t0
    assert all(r["status"] == "ok" and r["turns"] == 2 for r in records)
    assert took < 2.4  # 8 episodes x 2 steps of 0.3 s: 0.6 s in parallel, 4.8 s one by one
    assert gaps and max(gaps) < 0.2  # no step (0.3 s) held the loop


@skip_without("math")
def test_a_datasets_levels_are_the_difficulty(tmp_path: Path) -> None:
    items = [
        {"question": "1 + 1?", "answer": "2", "level": "Level 1"},
        {"question": "2 + 3?", "answer": "5", "level": "Level 3"},
        {"question": "3 + 3?", "answer": "6"},
    ]
    env = EvalEnv("eval:MATH500", kwargs={"dataset": items})
    agent = ScriptedAgent(lambda r: "\\boxed{2}")
    records = _play(tmp_path, agent, [env], EvalConfig(concurrency=2))
    assert [r["difficulty"] for r in records] == ["Level 1", "Level 3", "all"]
    assert [r["success"] for r in records] == [True, False, False]
