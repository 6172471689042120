"""The evaluation runner: every (env, task, sample) played as one episode of the engine.

A run is a list of :class:`Task`: task ``t`` of a dataset env is item ``t`` (``reset(options=
{"index": t})``); task ``t`` of a seeded env (games, reasoning-gym) is the episode seeded
``seed + t``. Each task is played ``n`` times (samples). The episodes are played by the episode
engine (:class:`gemgym.episodes.Engine`): ``concurrency`` in flight, each on its own env copy,
envs that block (sandboxes, graders, tools) on the engine's own threads. An episode depends
only on its task and sample (its reset seed, and the request seeds derived from the run seed
and its env, task, sample and turn), so results are the same at any concurrency.

How an episode counts (its record's ``status``, see :func:`record_status`):

* ``"ok"``: scored (a prompt longer than the model's context is a scored failure, ``truncation:
  "context"``, as :mod:`gemgym.llm` classifies it);
* ``"env_error"``: the env raised on the model's reply: scored as a failure (so a model cannot
  score higher by crashing the env) and reported apart, because it is a bug of the env;
* ``"error"``: the infrastructure failed (the server did not answer after the retries, a
  sandbox or grader could not run, the env could not reset): not scored, counted in the
  error rate, and played again by ``--resume`` (up to ``max_attempts`` tries in all).

Each record carries its ``attempt`` (1 for the first play of its episode). Records are written
as episodes end; the run goes on past failures.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemgym.episodes.engine import Engine, EnvSource, EpisodeSpec
from gemgym.episodes.outcomes import episode_seed
from gemgym.episodes.policy import BatchPolicy
from gemgym.episodes.record import Episode, encode_value
from gemgym.errors import ConfigError
from gemgym.evaluation.agents import EvalAgent
from gemgym.evaluation.results import RunDir, record_key
from gemgym.evaluation.scoring import PRESETS
from gemgym.evaluation.suites import EvalEnv
from gemgym.prompting import model_view

__all__ = ["EvalConfig", "Runner", "Task", "pending", "plan_tasks", "record_status"]


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
            raise ConfigError(f"n must be at least 1, got {self.n}")
        if any(k < 1 or k > self.n for k in self.ks):
            raise ConfigError(f"every k of ks must be in [1, n={self.n}], got {list(self.ks)}")
        if self.tasks < 1 or (self.limit is not None and self.limit < 1):
            raise ConfigError(f"tasks and limit must be at least 1, got {self.tasks}, {self.limit}")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1, got {self.max_turns}")


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
    from gemgym.envs.dataset import DatasetEnv

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
                seed = episode_seed(config.seed, t)
                tasks.append(Task(e, t, s, seed or 0, t if size is not None else None))
    return tasks, made


def _difficulty(task: Task, reset_info: dict[str, Any]) -> str:
    for key in ("difficulty", "level"):
        if reset_info.get(key) is not None:
            return str(reset_info[key])
    for p in PRESETS:
        if task.env.env_id.endswith("-" + p):
            return p
    return "all"


INFRASTRUCTURE_ERRORS = (
    "SandboxError",
    "SandboxUnavailableError",
    "VectorEnvError",
    "BrokenProcessPool",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "TimeoutError",
)
"""Exceptions raised in an env's step that are the machine's failure, not the env's bug (the
engine's error messages start with the exception's name)."""


def record_status(ep: Episode) -> str:
    """``"ok"``, ``"env_error"`` or ``"error"`` (see the module docstring)."""
    if not ep.failed:
        return "ok"
    if ep.error_stage == "step":
        name = (ep.error or "").split(":", 1)[0]
        if name not in INFRASTRUCTURE_ERRORS:
            return "env_error"
    return "error"


@dataclass
class Runner:
    """Plays tasks with an agent, appending one record per episode to a :class:`RunDir`.

    ``agent``: an :class:`~gemgym.evaluation.agents.EvalAgent` (a policy that answers one turn
    at a time: :class:`~gemgym.evaluation.ChatAgent`, :class:`~gemgym.evaluation.BackendAgent`)
    or a batch policy of the engine (:class:`gemgym.agents.RandomAgent`,
    :class:`gemgym.agents.OracleAgent`).
    ``on_record(record)`` is called after each record is written (progress display). ``envs``:
    one made env per env name (from :func:`plan_tasks`), played first (copies are made with
    ``spawn``-free factories as more are needed).
    """

    agent: EvalAgent | BatchPolicy
    config: EvalConfig
    run_dir: RunDir
    on_record: Callable[[dict[str, Any]], None] | None = None
    envs: dict[str, Any] = field(default_factory=dict)
    attempts: dict[tuple[str, int, int], int] = field(default_factory=dict)
    """How many times each episode was played before (its next record's ``attempt`` - 1)."""
    ray: str | None = None
    """A Ray cluster to play the envs on (``gemgym eval --ray ADDRESS``: ``auto``,
    ``HOST:6379``, or ``local``): each env name is a :class:`~gemgym.vector.ray.RayEnvSource`
    (episodes on a lost node are re-run elsewhere with the same seeds); ``None``: this
    process."""
    ray_options: dict[str, Any] = field(default_factory=dict)
    """More :class:`~gemgym.vector.ray.RayEnvSource` arguments (``resources={"sandbox": 1}``)."""
    _engine: Engine | None = None

    def _make_engine(self, tasks: Sequence[Task]) -> Engine:
        sources: dict[str, EnvSource] = {}
        for t in tasks:
            e = t.env
            if e.name not in sources and self.ray is not None:
                from gemgym.vector.ray import RayEnvSource

                address = None if self.ray == "local" else self.ray
                build = functools.partial(e.make, search_url=self.config.search_url)
                sources[e.name] = RayEnvSource(
                    build, env_id=e.env_id, address=address, **self.ray_options
                )
            if e.name not in sources:
                made = [self.envs.pop(e.name)] if e.name in self.envs else []

                def factory(e: EvalEnv = e, made: list[Any] = made) -> Any:
                    return made.pop() if made else e.make(search_url=self.config.search_url)

                sources[e.name] = EnvSource.make(factory, env_id=e.env_id)
        return Engine(
            self.agent,
            sources,
            concurrency=self.config.concurrency,
            max_turns=self.config.max_turns,
            seed=self.config.seed,
        )

    async def run(self, tasks: Iterable[Task]) -> int:
        """Play the tasks (``concurrency`` at once); returns how many records were written.

        Cancelled (Ctrl-C), it stops the episodes in flight; every record written stays.
        """
        todo = list(tasks)
        if not todo:
            return 0
        if self._engine is not None:
            self._engine.close()
        self._engine = engine = self._make_engine(todo)
        specs = [
            EpisodeSpec(
                k,
                t.seed,
                source=t.env.name,
                options=None if t.index is None else {"index": t.index},
                group=t.task,
                sample=t.sample,
                key=t.key,
            )
            for k, t in enumerate(todo)
        ]
        written = 0
        async for ep in engine.play(specs):
            record = self.record(todo[ep.index], ep)
            self.run_dir.append(record)
            written += 1
            if self.on_record is not None:
                self.on_record(record)
        return written

    def record(self, task: Task, ep: Episode) -> dict[str, Any]:
        """The run-folder record of ``task`` played as ``ep``."""
        transitions = []
        info = ep.reset_info
        for t in ep.turns:  # each observation as the model was shown it
            d = t.to_dict()
            d["observation"] = encode_value(model_view(t.observation, info))
            del d["next_observation"]
            transitions.append(d)
            info = t.info
        return {
            "env": task.env.name,
            "env_id": task.env.env_id,
            "tool": task.env.tool,
            "task": task.task,
            "sample": task.sample,
            "seed": task.seed,
            "index": task.index,
            "difficulty": _difficulty(task, ep.reset_info),
            "status": record_status(ep),
            "attempt": self.attempts.get(task.key, 0) + 1,
            "error": ep.error,
            "error_stage": ep.error_stage,
            "finish_reason": ep.finish_reason,
            "truncation": ep.truncation,
            "return": ep.total_return,
            "success": ep.success,
            "turns": ep.length,
            "cut": ep.truncation == "max_turns",
            "usage": {
                "prompt_tokens": ep.usage.get("prompt_tokens", 0),
                "completion_tokens": ep.usage.get("completion_tokens", 0),
            },
            "latency_s": sum(t.latency_s for t in ep.turns),
            "requests": ep.usage.get("requests", 0),
            "wall_s": ep.wall_s,
            "warnings": list(ep.warnings),
            "transitions": transitions,
        }

    def close(self) -> None:
        """Close every env made."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        for env in self.envs.values():
            with contextlib.suppress(Exception):
                env.close()
        self.envs.clear()


def pending(
    tasks: Sequence[Task], records: Iterable[dict[str, Any]], max_attempts: int | None = None
) -> list[Task]:
    """The tasks to play: those without a record, and those whose record is an ``error``
    played fewer than ``max_attempts`` times (``None``: no cap)."""
    latest = {record_key(r): r for r in records}

    def again(r: dict[str, Any]) -> bool:
        tries = int(r.get("attempt") or 1)
        return r.get("status") == "error" and (max_attempts is None or tries < max_attempts)

    return [t for t in tasks if t.key not in latest or again(latest[t.key])]
