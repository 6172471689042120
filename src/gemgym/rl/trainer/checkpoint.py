"""Checkpoints: a trainer's model, optimiser, counters, curves and random states."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemgym.errors import ConfigError
from gemgym.rl.trainer.config import TrainConfig

if TYPE_CHECKING:
    from gemgym.rl.trainer.loop import Trainer

__all__ = ["MODEL_SETTINGS", "load_checkpoint", "load_model_weights", "save_checkpoint"]

MODEL_SETTINGS = (
    "env_id",
    "env_kwargs",
    "model",
    "n_layer",
    "n_embd",
    "n_head",
    "n_positions",
    "tokenizer",
    "lora_rank",
    "lora_alpha",
)
"""Settings a checkpoint can only be resumed with unchanged."""


def save_checkpoint(trainer: Trainer, path: Path) -> None:
    """Save ``trainer``'s model, optimiser, counters, curves and random states at ``path``.

    The file is written beside ``path`` and then renamed onto it, so a run killed while saving
    leaves the previous checkpoint whole."""
    import torch

    collector_state, sample_rng = trainer.collection.state()
    ref_model = trainer.scorer.ref_model
    partial = path.with_name(path.name + ".partial")
    torch.save(
        {
            "model": trainer.model.state_dict(),
            "optimizer": trainer.optimizer.state_dict(),
            "config": asdict(trainer.config),
            "update": trainer.update,
            "elapsed": trainer.elapsed,
            "log_entropy_coef": trainer.log_entropy_coef,
            "sft_done": trainer.sft_done,
            "sft_step": trainer.sft_step,
            "rows": trainer.rows,
            "collector_group": collector_state["next_group"],
            "torch_rng": torch.get_rng_state(),
            "sample_rng": sample_rng,
            "ref_model": None if ref_model is None else ref_model.state_dict(),
        },
        partial,
    )
    os.replace(partial, path)


def load_model_weights(model: Any, path: Path | str, device: Any) -> None:
    """Load only the model weights of a checkpoint into ``model``."""
    import torch

    state = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])


def load_checkpoint(trainer: Trainer, path: Path) -> None:
    """Restore a checkpoint written by :func:`save_checkpoint` into ``trainer`` (made with the
    same :data:`MODEL_SETTINGS`)."""
    import torch

    state = torch.load(path, map_location=trainer.device, weights_only=False)
    saved = state["config"]
    for key in MODEL_SETTINGS:
        # a key missing from an older checkpoint had the default of its time
        if saved.get(key, getattr(TrainConfig, key)) != getattr(trainer.config, key):
            raise ConfigError(
                f"checkpoint {path} was made with {key}={saved.get(key)!r}, not "
                f"{getattr(trainer.config, key)!r}; use another out_dir or the same settings"
            )
    trainer.model.load_state_dict(state["model"])
    if state.get("ref_model") is not None:
        trainer.scorer.ref_model = None
        trainer.scorer.reference().load_state_dict(state["ref_model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.update = int(state["update"])
    trainer.elapsed = float(state["elapsed"])
    trainer.log_entropy_coef = float(state.get("log_entropy_coef", trainer.log_entropy_coef))
    trainer.sft_done = bool(state["sft_done"])
    trainer.sft_step = int(state.get("sft_step", 0))
    trainer.rows = list(state["rows"])
    trainer.collector.load_state_dict({"next_group": int(state["collector_group"])})
    torch.set_rng_state(state["torch_rng"].cpu())  # map_location moved it
    # a CUDA generator too takes a CPU state
    trainer.rollout_policy.generator.set_state(state["sample_rng"].cpu())
