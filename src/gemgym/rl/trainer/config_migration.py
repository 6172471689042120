"""The flat form of the trainer config that checkpoints and ``final.json`` held before the
sections (``asdict`` of one dataclass of 56 fields), and its migration to the sections of
:class:`~gemgym.rl.trainer.config.TrainConfig`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gemgym.errors import ConfigError

__all__ = ["LEGACY_FLAT_NAMES", "migrate_flat_config"]

LEGACY_FLAT_NAMES: dict[str, tuple[str, str]] = {
    "env_id": ("run", "env_id"),
    "env_kwargs": ("run", "env_kwargs"),
    "out_dir": ("run", "out_dir"),
    "seed": ("run", "seed"),
    "updates": ("run", "updates"),
    "time_budget_s": ("run", "time_budget_s"),
    "device": ("run", "device"),
    "threads": ("run", "threads"),
    "overlap": ("run", "overlap"),
    "model": ("policy", "model"),
    "n_layer": ("policy", "n_layer"),
    "n_embd": ("policy", "n_embd"),
    "n_head": ("policy", "n_head"),
    "n_positions": ("policy", "n_positions"),
    "tokenizer": ("policy", "tokenizer"),
    "obs_max_tokens": ("policy", "obs_max_tokens"),
    "lora_rank": ("policy", "lora_rank"),
    "lora_alpha": ("policy", "lora_alpha"),
    "system_prompt": ("policy", "system_prompt"),
    "estimator": ("rl", "estimator"),
    "gamma": ("rl", "gamma"),
    "episodes_per_update": ("rl", "episodes_per_update"),
    "group_size": ("rl", "group_size"),
    "keep_errors": ("rl", "keep_errors"),
    "lr": ("optim", "lr"),
    "lr_schedule": ("optim", "lr_schedule"),
    "warmup_updates": ("optim", "warmup_updates"),
    "max_grad_norm": ("optim", "max_grad_norm"),
    "epochs": ("ppo", "epochs"),
    "minibatches": ("ppo", "minibatches"),
    "clip_eps": ("ppo", "clip_eps"),
    "dual_clip": ("ppo", "dual_clip"),
    "entropy_coef": ("entropy", "coef"),
    "entropy_ref_min": ("entropy", "ref_min"),
    "entropy_turns": ("entropy", "turns"),
    "entropy_schedule": ("entropy", "schedule"),
    "entropy_decay_until": ("entropy", "decay_until"),
    "entropy_target": ("entropy", "target"),
    "entropy_target_lr": ("entropy", "target_lr"),
    "kl_coef": ("kl", "coef"),
    "kl_schedule": ("kl", "schedule"),
    "kl_decay_until": ("kl", "decay_until"),
    "kl_estimator": ("kl", "estimator"),
    "temperature": ("sampling", "temperature"),
    "min_p": ("sampling", "min_p"),
    "max_new_tokens": ("sampling", "max_new_tokens"),
    "sft_path": ("sft", "path"),
    "init_checkpoint": ("sft", "init_checkpoint"),
    "sft_steps": ("sft", "steps"),
    "sft_batch_size": ("sft", "batch_size"),
    "sft_lr": ("sft", "lr"),
    "eval_every": ("eval", "every"),
    "eval_episodes": ("eval", "every_episodes"),
    "final_eval_episodes": ("eval", "episodes"),
    "final_eval_greedy": ("eval", "greedy"),
    "eval_temperature": ("eval", "temperature"),
    "checkpoint_every": ("checkpoint", "every"),
    "checkpoint_every_s": ("checkpoint", "every_s"),
}
"""Each setting of the flat ``TrainConfig`` (checkpoints and ``final.json`` written before the
sections): its section and name now. Two changed meaning with the move: the flat
``eval_episodes`` was the periodic evaluations' size (now ``eval.every_episodes``) and
``final_eval_episodes`` the final one's (now ``eval.episodes``, the ``--eval-episodes`` flag's)."""


def migrate_flat_config(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The nested form of a flat config dict as the trainer wrote it before the sections
    (``asdict(TrainConfig)`` in ``checkpoint.pt`` and ``final.json``).

    Values carry over unchanged except where the field's type changed: ``dual_clip=None``
    (off) is ``0``, ``env_kwargs=None`` is ``{}``, ``entropy_target`` (a list in JSON) a
    tuple. A key the flat form never had is an error that names it."""
    unknown = sorted(set(flat) - set(LEGACY_FLAT_NAMES))
    if unknown:
        raise ConfigError(
            f"{unknown} are not settings of the flat (pre-section) TrainConfig; its settings: "
            f"{sorted(LEGACY_FLAT_NAMES)}"
        )
    nested: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        section, name = LEGACY_FLAT_NAMES[key]
        if key == "dual_clip" and value is None:
            value = 0.0
        elif key == "env_kwargs" and value is None:
            value = {}
        elif key == "entropy_target" and value is not None:
            value = tuple(value)
        if value is None:
            continue  # the default of every field that takes None
        nested.setdefault(section, {})[name] = value
    return nested
