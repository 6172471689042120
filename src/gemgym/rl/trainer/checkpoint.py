"""Checkpoints: a trainer's model, optimiser, counters, curves and random states."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemgym.errors import ConfigError
from gemgym.options import config_options
from gemgym.rl.trainer.config import (
    SECTIONS,
    TrainConfig,
    config_from_dict,
    migrate_flat_config,
)

if TYPE_CHECKING:
    from gemgym.rl.trainer.loop import Trainer

__all__ = [
    "MODEL_SETTINGS",
    "WEIGHT_SETTINGS",
    "config_from_checkpoint",
    "load_checkpoint",
    "load_model_weights",
    "save_checkpoint",
    "saved_config",
]

MODEL_SETTINGS = (
    "run.env_id",
    "run.env_kwargs",
    "run.wrappers",
    "policy.model",
    "policy.n_layer",
    "policy.n_embd",
    "policy.n_head",
    "policy.n_positions",
    "policy.tokenizer",
    "policy.lora_rank",
    "policy.lora_alpha",
)
"""Settings a checkpoint can only be resumed with unchanged."""

WEIGHT_SETTINGS = tuple(name for name in MODEL_SETTINGS if name.startswith("policy."))
"""Settings a checkpoint's weights can only be loaded with unchanged (``sft.init_checkpoint``:
the model's shape; the env may differ)."""


def _differences(
    saved: Mapping[str, Mapping[str, Any]], config: TrainConfig, names: tuple[str, ...]
) -> list[tuple[str, Any, Any]]:
    """The settings of ``names`` whose value in ``config`` is not the ``saved`` one: (name,
    saved value, value in ``config``) each, in the order of ``names``."""
    defaults = {opt.path: opt.default for opt in config_options(TrainConfig)}
    now = config.to_dict()
    found = []
    for path_name in names:
        section, name = path_name.split(".")
        # a setting missing from a checkpoint had the default of its time (or was None)
        was = saved.get(section, {}).get(name, defaults[path_name])
        is_now = now[section].get(name, defaults[path_name])
        if was != is_now:
            found.append((path_name, was, is_now))
    return found


def saved_config(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The nested config dict a checkpoint's ``state`` holds: as saved, or migrated from the
    flat form that checkpoints written before the sections hold (:func:`migrate_flat_config`)."""
    saved = state["config"]
    if not set(saved) & set(SECTIONS):
        return migrate_flat_config(saved)
    return {k: dict(v) for k, v in saved.items()}


def read_checkpoint(
    path: Path | str,
    device: Any = "cpu",
    *,
    given_as: str,
    fix: str = "give a checkpoint.pt from a run's output folder",
    needs: tuple[str, ...] = ("model", "config"),
) -> dict[str, Any]:
    """The state a checkpoint file holds; a file that is not one (another file, a truncated
    or empty one, one without the entries ``needs``) is a :class:`ConfigError` naming
    ``given_as``, the setting that gave it, and saying what to do (``fix``)."""
    import torch

    try:
        state = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # torch.load's errors: UnpicklingError, RuntimeError, EOFError, ...
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        state, problem = None, f"{type(e).__name__}: {why}"
    else:
        problem = "it holds no model weights" + (" and settings" if "config" in needs else "")
    if not isinstance(state, dict) or not set(needs) <= set(state):
        raise ConfigError(
            f"{given_as} {str(path)!r} is not a checkpoint written by the gemgym trainer "
            f"({problem}); {fix}"
        )
    return state


def config_from_checkpoint(path: Path | str) -> TrainConfig:
    """The :class:`TrainConfig` of the run that wrote the checkpoint at ``path`` (a checkpoint
    from before the sections too)."""
    return config_from_dict(saved_config(read_checkpoint(path, given_as="checkpoint")))


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
            "config": trainer.config.to_dict(),
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


def load_model_weights(
    model: Any, path: Path | str, device: Any, config: TrainConfig | None = None
) -> None:
    """Load only the model weights of a checkpoint into ``model``: a trainer checkpoint, or a
    file of the weights alone (``{"model": state_dict}``, as the shipped warm starts).

    With ``config`` (the run's), a checkpoint made with other :data:`WEIGHT_SETTINGS` is a
    :class:`ConfigError` that names them (a file of the weights alone records no settings);
    weights that do not fit ``model`` anyway are one too."""
    state = read_checkpoint(path, device, given_as="sft.init_checkpoint", needs=("model",))
    if config is not None and "config" in state:
        differ = _differences(saved_config(state), config, WEIGHT_SETTINGS)
        if differ:
            named = ", ".join(f"{name} {was!r} (not {now!r})" for name, was, now in differ)
            raise ConfigError(
                f"checkpoint {path} was made with other model settings: {named}; give the "
                "same settings to start from its weights, or another sft.init_checkpoint"
            )
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        why = str(e).strip().splitlines()[0]
        raise ConfigError(
            f"the weights of checkpoint {path} do not fit the model ({why}); give the model "
            "settings it was made with"
        ) from None


def load_checkpoint(trainer: Trainer, path: Path) -> None:
    """Restore a checkpoint written by :func:`save_checkpoint` into ``trainer`` (made with the
    same :data:`MODEL_SETTINGS`)."""
    import torch

    state = read_checkpoint(
        path,
        trainer.device,
        given_as="run.out_dir's checkpoint",
        fix="start a new run in another run.out_dir, or drop resume to start this one over",
    )
    differ = _differences(saved_config(state), trainer.config, MODEL_SETTINGS)
    if differ:
        path_name, was, is_now = differ[0]
        raise ConfigError(
            f"checkpoint {path} was made with {path_name} {was!r}, not {is_now!r}; use "
            "another run.out_dir or the same settings"
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
