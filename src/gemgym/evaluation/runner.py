"""The evaluation runner: every (env, task, sample) played as one async episode.

A run is a list of :class:`Task`: task ``t`` of a dataset env is item ``t`` (``reset(options=
{"index": t})``); task ``t`` of a seeded env (games, reasoning-gym) is the episode seeded
``seed + t``. Each task is played ``n`` times (samples). ``concurrency`` episodes are in flight
at once, each on its own env copy; an episode depends only on its task and sample (its reset
seed, and the request seeds derived from them), so results are the same at any concurrency.

An episode that fails (the agent gives up after its retries, the env raises) is recorded with
``status="error"`` and its message; the run goes on. Records are written as episodes end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemgym.errors import AgentError, ConfigError
from gemgym.evaluation.agents import Conversation, EvalAgent
from gemgym.evaluation.results import RunDir, record_key
from gemgym.evaluation.scoring import PRESETS
from gemgym.evaluation.suites import EvalEnv
from gemgym.experience import Transition
from gemgym.prompting import model_view

__all__ = ["EvalConfig", "Runner", "Task", "plan_tasks"]


@dataclass(frozen=True)
class EvalConfig:
    """Settings of a run that decide which episodes it plays."""

    n: int = 1
    ks: tuple[int, ...] = (1,)
    tasks: int = 32
    limit: int | None = None
    seed: int = 0
    concurrency: int = 16
    max_turns: int | None = None
    search_url: str | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"--n must be at least 1, got {self.n}")
        if any(k < 1 or k > self.n for k in self.ks):
            raise ConfigError(f"every --k must be in [1, --n={self.n}], got {list(self.ks)}")
        if self.tasks < 1 or (self.limit is not None and self.limit < 1):
            raise ConfigError("--tasks and --limit must be at least 1")
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"--max-turns must be at least 1, got {self.max_turns}")


@dataclass(frozen=True)
class Task:
    """One episode to play: sample ``sample`` of task ``task`` of ``env``."""

    env: EvalEnv
    task: int
    sample: int
    seed: int
    index: int | None  # the dataset item, for dataset envs

    @property
    def key(self) -> tuple[str, int, int]:
        """``(env name, task, sample)``."""
        return (self.env.name, self.task, self.sample)


def _dataset_size(env: Any) -> int | None:
    from gemgym.envs._dataset import DatasetEnv

    inner = env.unwrapped
    return len(inner.source) if isinstance(inner, DatasetEnv) else None


def plan_tasks(envs: Sequence[EvalEnv], config: EvalConfig) -> tuple[list[Task], dict[str, Any]]:
    """The tasks of a run, in order, and one env of each name (made to check and size it)."""
    tasks: list[Task] = []
    made: dict[str, Any] = {}
    for e in envs:
        env = e.make(search_url=config.search_url)
        made[e.name] = env
        size = _dataset_size(env)
        count = size if size is not None else config.tasks
        if config.limit is not None:
            count = min(count, config.limit)
        for t in range(count):
            for s in range(config.n):
                tasks.append(Task(e, t, s, config.seed + t, t if size is not None else None))
    return tasks, made


def _difficulty(task: Task, env: Any, reset_info: dict[str, Any]) -> str:
    for key in ("difficulty", "level"):
        if reset_info.get(key) is not None:
            return str(reset_info[key])
    item = getattr(env.unwrapped, "item", None)
    if isinstance(item, dict):
        for key in ("difficulty", "level"):
            if item.get(key) is not None:
                return str(item[key])
    for p in PRESETS:
        if task.env.env_id.endswith("-" + p):
            return p
    return "all"


@dataclass
class Runner:
    """Plays tasks with an agent, appending one record per episode to a :class:`RunDir`.

    ``on_record(record)`` is called after each record is written (progress display).
    """

    agent: EvalAgent
    config: EvalConfig
    run_dir: RunDir
    on_record: Callable[[dict[str, Any]], None] | None = None
    envs: dict[str, Any] = field(default_factory=dict)  # one made env per name, reused
    _idle: dict[str, list[Any]] = field(default_factory=dict)
    _all: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, env in self.envs.items():
            self._idle.setdefault(name, []).append(env)
            self._all.append(env)

    def _acquire(self, e: EvalEnv) -> Any:
        idle = self._idle.setdefault(e.name, [])
        if idle:
            return idle.pop()
        env = e.make(search_url=self.config.search_url)
        self._all.append(env)
        return env

    def _release(self, e: EvalEnv, env: Any, healthy: bool) -> None:
        if healthy:
            self._idle[e.name].append(env)
        else:
            self._all.remove(env)
            with contextlib.suppress(Exception):
                env.close()

    async def run(self, tasks: Iterable[Task]) -> int:
        """Play the tasks (``concurrency`` at once); returns how many records were written.

        Cancelled (Ctrl-C), it stops the episodes in flight; every record written stays.
        """
        queue = list(tasks)
        queue.reverse()
        written = 0

        async def worker() -> None:
            nonlocal written
            while queue:
                task = queue.pop()
                record = await self.play(task)
                self.run_dir.append(record)
                written += 1
                if self.on_record is not None:
                    self.on_record(record)

        workers = [asyncio.create_task(worker()) for _ in range(self.config.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        return written

    async def play(self, task: Task) -> dict[str, Any]:
        """Play one episode; a failure becomes a record with ``status="error"``."""
        env = self._acquire(task.env)
        t0 = time.perf_counter()
        record: dict[str, Any] = {
            "env": task.env.name,
            "env_id": task.env.env_id,
            "tool": task.env.tool,
            "task": task.task,
            "sample": task.sample,
            "seed": task.seed,
            "index": task.index,
            "difficulty": "all",
            "status": "ok",
            "error": None,
            "return": 0.0,
            "success": False,
            "turns": 0,
            "cut": False,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "latency_s": 0.0,
            "requests": 0,
        }
        transitions: list[dict[str, Any]] = []
        healthy = True
        try:
            options = None if task.index is None else {"index": task.index}
            obs, info = await env.areset(seed=task.seed, options=options)
            record["difficulty"] = _difficulty(task, env, info)
            conv = Conversation(task.key, env)
            threaded = type(env.unwrapped).__module__ == "gemgym.envs.code"
            while True:
                view = model_view(obs, info)
                reply = await self.agent.act(conv, view)
                record["usage"]["prompt_tokens"] += reply.prompt_tokens
                record["usage"]["completion_tokens"] += reply.completion_tokens
                record["latency_s"] += reply.latency_s
                record["requests"] += reply.requests
                if threaded:
                    step = await asyncio.to_thread(env.step, reply.action)
                else:
                    step = await env.astep(reply.action)
                obs, reward, terminated, truncated, info = step
                conv.turn += 1
                transitions.append(
                    Transition(view, reply.action, reward, terminated, truncated, info).to_dict()
                )
                record["return"] += float(reward)
                if terminated or truncated:
                    record["success"] = bool(
                        info.get("success", bool(terminated) and float(reward) > 0)
                    )
                    break
                if self.config.max_turns is not None and conv.turn >= self.config.max_turns:
                    record["cut"] = True
                    break
        except asyncio.CancelledError:
            healthy = False
            raise
        except AgentError as e:
            record["status"], record["error"] = "error", str(e)
        except Exception as e:
            healthy = False
            record["status"], record["error"] = "error", f"{type(e).__name__}: {e}"
        finally:
            self._release(task.env, env, healthy)
        record["turns"] = len(transitions)
        record["wall_s"] = time.perf_counter() - t0
        record["transitions"] = transitions
        return record

    def close(self) -> None:
        """Close every env made."""
        for env in self._all:
            with contextlib.suppress(Exception):
                env.close()
        self._all.clear()
        self._idle.clear()


def pending(tasks: Sequence[Task], records: Iterable[dict[str, Any]]) -> list[Task]:
    """The tasks without a scored record (errors are played again)."""
    done = {record_key(r) for r in records if r.get("status") == "ok"}
    return [t for t in tasks if t.key not in done]
