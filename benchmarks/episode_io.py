"""Slow env I/O through every front end: 64 episodes of an env whose step takes 0.2 s.

The env (``bench:BlockingSleep-v0``, ``BlockingSleepEnv`` of ``tests/helpers/envs.py``)
sleeps ``--step-s`` seconds in its sync ``step`` and declares ``blocking_io``, as the code,
terminal and math envs do; episodes last ``--turns`` steps. The baseline, measured in the same
run, is a ``thread``-backend vector env of 64 envs stepped in lockstep (every env's step at
once, in threads), timed from ``make_vec`` (its envs and threads made) to the last step, as
each front end is timed from its call (its envs and threads made) to its last episode; the
baseline's stepping alone (reset and steps) is shown too. Each front end plays the same 64
episodes on the episode engine:

* ``rollout``: :func:`gemgym.rollout` with a batched agent (``batch_size=64``);
* ``collector``: :class:`gemgym.rl.Collector` with a batched policy (``num_envs=64``);
* ``rollout_tokens``: :func:`gemgym.llm.rollout_tokens` with a scripted backend (per-turn
  async requests, 64 in flight; a tiny chat model's tokenizer renders the turns);
* ``eval``: ``gemgym eval``'s runner with the random agent (concurrency 64).

Each figure is the median of ``--repeats`` runs (the first run of each front end also pays its
imports). The goal: every front end within 10 % of the thread backend's wall time.

Run: ``.venv/bin/python benchmarks/episode_io.py [--episodes 64] [--step-s 0.2] [--turns 3]
[--repeats 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

from _testkit import register_bench_envs

import gemgym
from gemgym.agents import FunctionAgent
from gemgym.llm.backend import BackendCapabilities, Generation, GenerationRequest
from gemgym.vector import make_vec

register_bench_envs()

ENV = "bench:BlockingSleep-v0"


class _Scripted:
    name = "scripted"
    capabilities = BackendCapabilities(token_ids=True, logprobs=False)

    def __init__(self, tok: Any) -> None:
        self.tokenizer = tok
        self.ids = [*tok("x", add_special_tokens=False)["input_ids"], tok.eos_token_id]

    async def generate(self, request: GenerationRequest) -> Generation:
        return Generation(list(self.ids), None, "x", "stop")

    async def aclose(self) -> None:
        pass


def thread_baseline(n: int, kw: dict[str, Any], turns: int) -> tuple[float, float]:
    """Seconds from ``make_vec`` to the last step, and for the reset and steps alone."""
    t0 = time.perf_counter()
    venv = make_vec(ENV, n, backend="thread", autoreset_mode="disabled", **kw)
    try:
        t1 = time.perf_counter()
        venv.reset(seed=0)
        for _ in range(turns):
            venv.step(["x"] * n)
        t2 = time.perf_counter()
        return t2 - t0, t2 - t1
    finally:
        venv.close()


def run_rollout(n: int, kw: dict[str, Any]) -> float:
    agent = FunctionAgent(lambda obs: ["x"] * len(obs))
    t0 = time.perf_counter()
    eps = list(gemgym.rollout(ENV, agent, episodes=n, batch_size=n, seed=0, **kw))
    assert len(eps) == n and not any(e.failed for e in eps)
    return time.perf_counter() - t0


def run_collector(n: int, kw: dict[str, Any]) -> float:
    from gemgym.rl import Collector

    t0 = time.perf_counter()  # the collector makes its envs
    with Collector(ENV, lambda obs: ["x"] * len(obs), num_envs=n, env_kwargs=kw) as col:
        batch = col.collect(n)
        took = time.perf_counter() - t0
    assert len(batch) == n
    return took


def run_tokens(n: int, kw: dict[str, Any]) -> float:
    from pathlib import Path

    from transformers import AutoTokenizer

    from gemgym.llm import build_tiny_chat_model, rollout_tokens

    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(build_tiny_chat_model(Path(tmp) / "m", "chatml"))
    t0 = time.perf_counter()
    eps = rollout_tokens(ENV, _Scripted(tok), episodes=n, batch_size=n, seed=0, **kw)
    assert len(eps) == n and not any(e.failed for e in eps), [e.error for e in eps][:2]
    return time.perf_counter() - t0


def run_eval(n: int, kw: dict[str, Any]) -> float:
    from gemgym.agents import RandomAgent
    from gemgym.evaluation.results import RunDir
    from gemgym.evaluation.runner import EvalConfig, Runner, plan_tasks
    from gemgym.evaluation.suites import EvalEnv

    config = EvalConfig(tasks=n, concurrency=n)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = RunDir(tmp + "/run")
        run_dir.path.mkdir(parents=True)
        run_dir.open_for_append()
        t0 = time.perf_counter()  # planning makes the envs
        tasks, made = plan_tasks([EvalEnv(ENV, kwargs=kw)], config)
        runner = Runner(RandomAgent(), config, run_dir, envs=made)
        try:
            written = asyncio.run(runner.run(tasks))
            took = time.perf_counter() - t0
        finally:
            runner.close()
            run_dir.close()
    assert written == n
    return took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--step-s", type=float, default=0.2)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    n = args.episodes
    kw = {"sleep_s": args.step_s, "episode_length": args.turns}
    runs = [thread_baseline(n, kw, args.turns) for _ in range(args.repeats)]
    base = statistics.median(r[0] for r in runs)
    played = statistics.median(r[1] for r in runs)
    ideal = args.step_s * args.turns
    print(f"{n} episodes x {args.turns} steps of {args.step_s} s (ideal {ideal:.2f} s)")
    print(f"{'front end':<16} {'wall s':>7} {'vs thread':>10} {'vs stepping':>12}")
    print(f"{'thread backend':<16} {base:>7.2f} {1.0:>10.2f} {base / played:>12.2f}")
    print(f"{'  stepping only':<16} {played:>7.2f} {played / base:>10.2f} {1.0:>12.2f}")
    for name, fn in (
        ("rollout", run_rollout),
        ("collector", run_collector),
        ("rollout_tokens", run_tokens),
        ("eval", run_eval),
    ):
        took = statistics.median(fn(n, kw) for _ in range(args.repeats))
        print(f"{name:<16} {took:>7.2f} {took / base:>10.2f} {took / played:>12.2f}")


if __name__ == "__main__":
    main()
