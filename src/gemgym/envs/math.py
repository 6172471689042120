r"""Math word problems and competition math, graded on the last ``\boxed{}`` (single turn).

============  =================================================================================
ids           training sets ``math:ASDiv2K``, ``math:GSM8K``, ``math:Math12K``,
              ``math:Math8K-3to5``, ``math:Orz57K``, ``math:DeepScaleR40K``; evaluation sets
              (dataset order, no shuffling) ``eval:MATH500``, ``eval:AMC``,
              ``eval:OlympiadBench``, ``eval:Minerva``, ``eval:AIME24``
data          GEM's Hugging Face datasets (``axon-rl/GSM-8k``, ... ; see ``docs/tasks.md``); offline
              without a cached copy the env uses the small sample shipped in
              ``gemgym/envs/data/math/`` and warns. ``dataset=`` takes a Hub id, a local
              ``.jsonl``/``.parquet``/``.arrow`` file, a list of dicts or ``"sample"``;
              ``columns=`` maps ``question``/``answer`` to the file's column names
observation   the problem text (as GEM: no instruction added; ask for ``\boxed{}`` in your prompt)
action        any text; the content of the last ``\boxed{...}`` is the answer
reward        1.0 if it equals a gold answer (:func:`gemgym.grading.grade_math`: normalised text,
              exact rational comparison of plain numbers, else math-verify with a time limit),
              else 0.0; no ``\boxed{}``: 0.0, or −0.1 with ``format_penalty=True`` (GEM's
              optional format reward). The episode ends after one step (``terminated``), with
              the observation ``"<｜TERMINAL_STATE｜>"``
info          ``correct``, ``extracted`` (the boxed answer or ``None``), ``grading`` (what
              decided: ``text``, ``number``, ``math_verify``, ``timeout``, ...), ``index``;
              ``format_error`` when nothing was boxed
expert        ``\boxed{<gold answer>}``
options       ``reset(options={"index": i})`` serves item ``i``
============  =================================================================================

With the Python tool (GEM's math-with-Python setting)::

    from gemgym.wrappers.tools import python_tool_wrapper   # see gemgym.wrappers.tools
    env = gemgym.make("math:GSM8K", wrappers=[python_tool_wrapper()])

Differences from upstream GEM: datasets load offline from a local file or the shipped sample
instead of failing at ``make()``; the order is seeded per env (``reset(seed=)``), never by the
global RNG; the episode ends with ``terminated=True, truncated=False`` (GEM set both); grading
times out the same way in threads, processes and Ray workers (GEM's signal mode failed in
threads, its pool mode kept one process per env); ``1e3`` ≡ ``1000`` (GEM judged it wrong).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gemgym.envs.dataset import DatasetEnv, DatasetSource, DatasetSpec, Item
from gemgym.errors import ConfigError, GemGymError
from gemgym.registry import register

if TYPE_CHECKING:
    import random

__all__ = ["FORMAT_PENALTY", "MATH_DATASETS", "MathEnv", "MathGradingMixin", "gold_answers"]

FORMAT_PENALTY = -0.1
"""Reward of an answer with no ``\\boxed{}`` when ``format_penalty=True`` (GEM's value)."""

_COLS = {"question": "problem", "answer": "answer"}
_EVAL = "axon-rl/math-eval"

MATH_DATASETS: dict[str, DatasetSpec] = {
    "math:ASDiv2K": DatasetSpec("ASDiv2K", "axon-rl/ASDIV-2k", sample="math/asdiv.jsonl"),
    "math:GSM8K": DatasetSpec("GSM8K", "axon-rl/GSM-8k", sample="math/gsm8k.jsonl"),
    "math:Math12K": DatasetSpec("Math12K", "axon-rl/MATH-12k", sample="math/math.jsonl"),
    "math:Math8K-3to5": DatasetSpec(
        "Math8K-3to5", "axon-rl/MATH-lvl3to5-8k", sample="math/math.jsonl"
    ),
    "math:Orz57K": DatasetSpec("Orz57K", "axon-rl/ORZ-57k", sample="math/math.jsonl"),
    "math:DeepScaleR40K": DatasetSpec(
        "DeepScaleR40K", "axon-rl/DeepScaleR-40K", sample="math/amc.jsonl"
    ),
    "eval:MATH500": DatasetSpec("MATH500", _EVAL, split="math", sample="math/math.jsonl"),
    "eval:AMC": DatasetSpec("AMC", _EVAL, split="amc", sample="math/amc.jsonl"),
    "eval:OlympiadBench": DatasetSpec(
        "OlympiadBench", _EVAL, split="olympiad_bench", sample="math/olympiad.jsonl"
    ),
    "eval:Minerva": DatasetSpec("Minerva", _EVAL, split="minerva", sample="math/minerva.jsonl"),
    "eval:AIME24": DatasetSpec("AIME24", _EVAL, split="aime24", sample="math/aime24.jsonl"),
}
"""The default dataset of every math id (Hub id, split, shipped sample)."""

for _id, _spec in list(MATH_DATASETS.items()):
    MATH_DATASETS[_id] = DatasetSpec(
        _spec.name, _spec.hub_id, _spec.split, _spec.subset, _spec.sample, _COLS
    )


def gold_answers(item: Item) -> list[str]:
    """The item's gold answers as strings (a list column gives several)."""
    gold = item["answer"]
    if isinstance(gold, list | tuple):
        return [str(g) for g in gold]
    return [str(gold)]


class MathGradingMixin:
    """Grading, random and expert actions shared by the math envs (text and visual)."""

    format_penalty: bool
    timeout: float
    item: Item | None
    rng: random.Random
    _closed: bool
    blocking_io = True  # math-verify runs in the grading pool's processes

    def warmup(self) -> None:
        """Start the process-wide grading pool (its warm template and a worker) now and wait
        until it is ready, not in a first step. Idempotent and thread-safe; a closed env
        starts nothing. The pool is shared by every math env of the process and stops with it
        (or :meth:`gemgym.grading.pool.GradingPool.close`), not with this env."""
        if self._closed:
            return
        from gemgym.grading.pool import default_pool

        with contextlib.suppress(ImportError, GemGymError):  # the first grading says why
            default_pool().warm_up()

    def grade(self, action: str, item: Item) -> tuple[float, dict[str, Any]]:
        """Reward and info for ``action`` (see the module docstring)."""
        from gemgym.grading.math import grade_math

        result = grade_math(action, gold_answers(item), timeout=self.timeout)
        info: dict[str, Any] = {
            "correct": result.correct,
            "success": result.correct,
            "extracted": result.extracted,
            "grading": result.method,
        }
        if result.extracted is None:
            info["format_error"] = True
            return (FORMAT_PENALTY if self.format_penalty else 0.0), info
        return (1.0 if result.correct else 0.0), info

    def sample_random_action(self) -> str:
        """A boxed random integer."""
        return "\\boxed{" + str(self.rng.randint(0, 100)) + "}"

    def expert_action(self) -> str:
        """The boxed gold answer."""
        if self.item is None:
            return "\\boxed{}"
        return "\\boxed{" + gold_answers(self.item)[0] + "}"


class MathEnv(MathGradingMixin, DatasetEnv[str]):
    """A math problem per episode, graded on the last ``\\boxed{}`` (see the module docstring).

    Args:
        dataset: where the problems come from (see :mod:`gemgym.envs.dataset`).
        columns: field -> column mapping for ``question`` and ``answer``.
        split: the split to load (default: the id's).
        spec_id: which default dataset to use (the registered id sets it).
        shuffle: visit the problems in a seeded order (training) or in dataset order (eval).
        format_penalty: give −0.1 instead of 0 when the answer has no ``\\boxed{}``.
        timeout: seconds math-verify may spend on one gold answer before the answer is wrong.
    """

    def __init__(
        self,
        dataset: DatasetSource = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        spec_id: str = "math:GSM8K",
        shuffle: bool = True,
        format_penalty: bool = False,
        timeout: float = 1.0,
    ) -> None:
        if spec_id not in MATH_DATASETS:
            raise ConfigError(f"spec_id must be one of {sorted(MATH_DATASETS)}, got {spec_id!r}")
        if not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.format_penalty = format_penalty
        self.timeout = float(timeout)
        self._init_dataset(
            dataset, columns=columns, split=split, spec=MATH_DATASETS[spec_id], shuffle=shuffle
        )

    def observe(self, item: Item) -> str:
        return str(item["question"])


for _id, _spec in MATH_DATASETS.items():
    _eval = _id.startswith("eval:")
    register(
        _id,
        "gemgym.envs.math:MathEnv",
        kwargs={"spec_id": _id, "shuffle": not _eval},
        description=f"{_spec.name} math problems, boxed answer ({_spec.hub_id}"
        + (f", split {_spec.split})" if _eval else ")"),
        extra="math",
    )
