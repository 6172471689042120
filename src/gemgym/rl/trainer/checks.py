"""What a training run checks and tells about itself: its input files, batches the env could
not read, and how SFT and RL share the time budget."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gemgym.errors import ConfigError
from gemgym.experience import Episode
from gemgym.rl.trainer.config import TrainConfig

__all__ = [
    "FormatErrorWarning",
    "budget_split",
    "check_input_files",
    "format_error_message",
    "format_error_share",
    "sft_plan",
]


class FormatErrorWarning(UserWarning):
    """Every episode of a training batch ended in a format error: nothing to learn from."""


def format_error_share(episodes: Sequence[Episode]) -> float:
    """The share of ``episodes`` that hold a format error (a step whose info has a true
    ``format_error``: the env could not read the action); 0 for no episodes."""
    if not episodes:
        return 0.0
    bad = sum(any(t.info.get("format_error") for t in e.transitions) for e in episodes)
    return bad / len(episodes)


def check_input_files(config: TrainConfig) -> None:
    """The files a run reads (``sft.path``, ``sft.init_checkpoint``) exist: a clear error
    before the model is built."""
    given = (
        (
            "sft.path",
            config.sft.path,
            "recorded episodes (JSONL from `gemgym run ... --out FILE.jsonl`)",
        ),
        (
            "sft.init_checkpoint",
            config.sft.init_checkpoint,
            "a checkpoint.pt written by gemgym train",
        ),
    )
    for name, value, what in given:
        if value is not None and not Path(value).is_file():
            why = "is a directory" if Path(value).is_dir() else "does not exist"
            raise ConfigError(f"{name} {value!r} {why}: give {what}")


def format_error_message(update: int) -> str:
    """The warning for a batch whose every episode ended in a format error."""
    return (
        f"update {update}: every episode of the batch ended in a format error (the "
        "env could not read the policy's action), so all returns are the same and there "
        "is nothing to learn from. Start from a policy that writes valid actions: an SFT "
        "warm start on recorded episodes (sft.path: a JSONL file from `gemgym run ... "
        "--out FILE.jsonl`) or a checkpoint's weights (sft.init_checkpoint)."
    )


def sft_plan(cfg: TrainConfig, episodes: int) -> str:
    """The log line before SFT: what it does and how the time budget is shared."""
    plan = (
        f"SFT: {cfg.sft.steps} steps of {min(cfg.sft.batch_size, episodes)} episodes "
        f"(of {episodes}) from {cfg.sft.path}"
    )
    if cfg.run.time_budget_s is None:
        return plan
    return (
        f"{plan}; the time budget of {cfg.run.time_budget_s:.0f} s covers SFT and RL: SFT runs "
        "all its steps first, RL gets what is left (sft.steps sets SFT's share)"
    )


def budget_split(config: TrainConfig, elapsed: float) -> str:
    """The log line after SFT: how the time budget was split between SFT and RL."""
    budget = config.run.time_budget_s or 0.0
    left = max(0.0, budget - elapsed)
    line = (
        f"time budget {budget:.0f} s: SFT took {elapsed:.0f} s "
        f"({elapsed / budget if budget > 0 else 1.0:.0%}), RL gets the remaining {left:.0f} s"
    )
    if left <= 0:
        line += " (none: give a larger run.time_budget_s or fewer sft.steps)"
    return line
