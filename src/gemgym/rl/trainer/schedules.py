"""Schedules of the run: its progress, the learning rate, and the entropy and KL coefficients.

Pure functions of the settings and of where the run stands; :class:`~gemgym.rl.trainer.Trainer`
calls them with its update count and elapsed time.
"""

from __future__ import annotations

import math

from gemgym.rl.trainer.config import TrainConfig

__all__ = [
    "ENTROPY_COEF_RANGE",
    "adapted_log_coef",
    "entropy_target_at",
    "learning_rate",
    "run_progress",
    "scheduled",
]

ENTROPY_COEF_RANGE = (math.log(1e-3), 0.0)
"""The natural-log bounds of the bonus coefficient that ``entropy.target`` adapts."""


def run_progress(config: TrainConfig, update: int, elapsed: float) -> float:
    """The share of the run done: of the time budget, or of ``run.updates`` without one."""
    if config.run.time_budget_s is not None:
        return min(1.0, elapsed / config.run.time_budget_s)
    return min(1.0, update / max(1, config.run.updates or 1))


def learning_rate(config: TrainConfig, update: int, progress: float) -> float:
    """``optim.lr``, times a linear warm-up over the first ``optim.warmup_updates`` updates
    (``update``: the updates done), times ``(1 + cos(pi * progress)) / 2`` with the cosine schedule."""
    factor = 1.0
    if config.optim.warmup_updates:
        factor = min(1.0, (update + 1) / config.optim.warmup_updates)
    if config.optim.lr_schedule == "cosine":
        factor *= 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.optim.lr * factor


def scheduled(coef: float, schedule: str, until: float, progress: float) -> float:
    """``coef``, or with the ``"linear"`` schedule ``coef * max(0, 1 - progress / until)``."""
    if schedule == "linear":
        return coef * max(0.0, 1.0 - progress / until)
    return coef


def entropy_target_at(config: TrainConfig, progress: float) -> float:
    """The entropy (nats) ``entropy.target`` asks for at ``progress``: its start, moved linearly
    toward its end."""
    start, end = config.entropy.target_range or (0.0, 0.0)
    return start + (end - start) * progress


def adapted_log_coef(log_coef: float, rate: float, target: float, entropy: float) -> float:
    """``log_coef + rate * (target - entropy)``, kept within :data:`ENTROPY_COEF_RANGE`."""
    step = rate * (target - entropy)
    return min(ENTROPY_COEF_RANGE[1], max(ENTROPY_COEF_RANGE[0], log_coef + step))
