"""The trainer's settings: :class:`TrainConfig`, its validation, and :func:`config_from_dict`.

The settings are one dataclass whose fields :data:`SECTIONS` groups by what they control
(run, policy, rl, ppo, entropy, kl, sampling, sft, evaluation): :meth:`TrainConfig.sections` gives
the nested form, :func:`config_from_dict` reads it back (or the flat form that checkpoints and
``final.json`` store), and ``gemgym train --help`` lists the flags by section. Validation is the
same whichever form a config comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from gemgym.errors import ConfigError
from gemgym.rl.trainer.codec import TOKENIZERS

__all__ = ["KL_ESTIMATORS", "SECTIONS", "TrainConfig", "config_from_dict"]

KL_ESTIMATORS = ("k3", "exact")
"""``TrainConfig.kl_estimator``: GRPO's k3 on the sampled tokens, or the exact KL over the
vocabulary at every action token (:func:`exact_kl_penalty`)."""


@dataclass
class TrainConfig:
    """Everything a run depends on (saved in the checkpoint)."""

    env_id: str = "game:GuessTheNumber-v0-easy"
    env_kwargs: dict[str, Any] | None = None
    out_dir: str = "runs/train"
    estimator: str = "rebn"
    gamma: float = 0.9
    model: str | None = None
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_positions: int = 512
    tokenizer: str = "bytes"
    lora_rank: int = 0
    lora_alpha: int = 16
    system_prompt: str | None = None
    seed: int = 0
    episodes_per_update: int = 64
    group_size: int = 1
    lr: float = 1e-3
    warmup_updates: int = 0
    lr_schedule: str = "constant"
    max_grad_norm: float = 1.0
    epochs: int = 1
    minibatches: int = 1
    clip_eps: float = 0.2
    dual_clip: float | None = 3.0
    entropy_coef: float = 0.0
    entropy_ref_min: float | None = None
    entropy_turns: int | None = None
    entropy_schedule: str = "constant"
    entropy_decay_until: float = 1.0
    entropy_target: tuple[float, float] | None = None
    entropy_target_lr: float = 0.05
    kl_coef: float = 0.0
    kl_schedule: str = "constant"
    kl_decay_until: float = 1.0
    kl_estimator: str = "k3"
    updates: int | None = None
    time_budget_s: float | None = None
    sft_path: str | None = None
    init_checkpoint: str | None = None
    sft_steps: int = 300
    sft_batch_size: int = 64
    sft_lr: float = 1e-3
    max_new_tokens: int = 16
    obs_max_tokens: int = 128
    temperature: float = 1.0
    min_p: float = 0.0
    eval_temperature: float | None = None
    eval_every: int = 0
    eval_episodes: int = 256
    final_eval_episodes: int = 1000
    final_eval_greedy: bool = True
    checkpoint_every: int = 25
    checkpoint_every_s: float = 180.0
    """Also save a checkpoint (and the curves) when this many seconds have passed since the last
    one, in SFT and in RL (0: only every ``checkpoint_every`` updates)."""
    device: str = "auto"
    threads: int | None = None
    overlap: bool = False
    keep_errors: bool = False
    """Train on failed episodes too (``finish_reason == "error"``: the env or the policy raised),
    with their partial returns. By default they are left out of each batch (the rest of their
    group stays, baselined on the episodes left) and counted in the curve row's ``errors``."""

    def sections(self) -> dict[str, dict[str, Any]]:
        """The settings grouped as in :data:`SECTIONS`: ``{"kl": {"kl_coef": 0.0, ...}, ...}``."""
        return {name: {f: getattr(self, f) for f in names} for name, names in SECTIONS.items()}

    def validate(self) -> None:
        """Raise :class:`ConfigError` for inconsistent settings."""
        from gemgym.rl.advantages import ESTIMATORS, GROUP_ESTIMATORS  # numpy: not at import

        if self.estimator not in ESTIMATORS or self.estimator == "gae":
            raise ConfigError(
                f"estimator must be one of {[e for e in ESTIMATORS if e != 'gae']} (the "
                f"reference trainer has no critic), got {self.estimator!r}"
            )
        if self.estimator in GROUP_ESTIMATORS and self.group_size < 2:
            raise ConfigError(f"estimator {self.estimator!r} needs group_size >= 2")
        if self.episodes_per_update % self.group_size:
            raise ConfigError("episodes_per_update must be a multiple of group_size")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.init_checkpoint and self.sft_path:
            raise ConfigError("give init_checkpoint (weights to start from) or sft_path, not both")
        if self.tokenizer not in TOKENIZERS:
            raise ConfigError(
                f"tokenizer must be one of {list(TOKENIZERS)}, got {self.tokenizer!r}"
            )
        if self.model is not None and self.tokenizer != "bytes":
            raise ConfigError(
                f"tokenizer={self.tokenizer!r} is for the default model; a Hugging Face model "
                "uses its own tokenizer"
            )
        if self.lora_rank < 0 or self.lora_alpha <= 0:
            raise ConfigError(
                f"lora_rank must be >= 0 and lora_alpha > 0, got {self.lora_rank}, {self.lora_alpha}"
            )
        for name in ("lora_rank", "system_prompt"):
            if getattr(self, name) and self.model is None:
                raise ConfigError(
                    f"{name} is for a Hugging Face model: give one with model (--model PATH)"
                )
        if self.model is not None and self.min_p:
            raise ConfigError(
                "min_p is for the default model; a Hugging Face model samples through "
                "gemgym.llm (temperature, max_new_tokens): drop min_p"
            )
        if self.lr_schedule not in ("constant", "cosine"):
            raise ConfigError(
                f"lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}"
            )
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"dual_clip must be > 1 (or None), got {self.dual_clip}")
        if self.entropy_coef < 0:
            raise ConfigError(f"entropy_coef must be >= 0, got {self.entropy_coef}")
        if self.entropy_ref_min is not None and self.entropy_ref_min < 0:
            raise ConfigError(f"entropy_ref_min must be >= 0 (or None), got {self.entropy_ref_min}")
        if self.entropy_turns is not None and self.entropy_turns < 1:
            raise ConfigError(f"entropy_turns must be >= 1 (or None), got {self.entropy_turns}")
        for name in ("entropy_ref_min", "entropy_turns"):
            if getattr(self, name) is not None and not self.entropy_coef:
                raise ConfigError(
                    f"{name} restricts the entropy bonus to some tokens: give entropy_coef > 0 "
                    "(--entropy-coef) too"
                )
        if self.entropy_target is not None:
            target = self.entropy_target
            if (
                not isinstance(target, (tuple, list))
                or len(target) != 2
                or not all(isinstance(h, (int, float)) and h >= 0 for h in target)
            ):
                raise ConfigError(
                    "entropy_target must be two entropies >= 0 in nats, (start, end), got "
                    f"{target!r}"
                )
            self.entropy_target = (float(target[0]), float(target[1]))
            if not self.entropy_coef:
                raise ConfigError(
                    "entropy_target adapts the entropy bonus from its starting value: give "
                    "entropy_coef > 0 (--entropy-coef) too"
                )
            if self.entropy_ref_min is None and self.entropy_turns is None:
                raise ConfigError(
                    "entropy_target needs the tokens whose entropy it follows: give "
                    "entropy_ref_min (--entropy-ref-min) or entropy_turns (--entropy-turns)"
                )
            if self.entropy_schedule != "constant":
                raise ConfigError(
                    "entropy_target sets the bonus itself: leave entropy_schedule 'constant'"
                )
        if self.entropy_target_lr <= 0:
            raise ConfigError(f"entropy_target_lr must be > 0, got {self.entropy_target_lr}")
        if not 0.0 < self.entropy_decay_until <= 1.0:
            raise ConfigError(
                f"entropy_decay_until must be in (0, 1], got {self.entropy_decay_until}"
            )
        if self.entropy_schedule not in ("constant", "linear"):
            raise ConfigError(
                f"entropy_schedule must be 'constant' or 'linear', got {self.entropy_schedule!r}"
            )
        if self.kl_coef < 0:
            raise ConfigError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.kl_schedule not in ("constant", "linear"):
            raise ConfigError(
                f"kl_schedule must be 'constant' or 'linear', got {self.kl_schedule!r}"
            )
        if not 0.0 < self.kl_decay_until <= 1.0:
            raise ConfigError(f"kl_decay_until must be in (0, 1], got {self.kl_decay_until}")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ConfigError(
                f"kl_estimator must be one of {list(KL_ESTIMATORS)}, got {self.kl_estimator!r}"
            )
        if self.kl_estimator != "k3" and not self.kl_coef:
            raise ConfigError(
                f"kl_estimator={self.kl_estimator!r} chooses how the KL penalty is computed: give "
                "kl_coef > 0 (--kl-coef) too"
            )
        if not 0.0 <= self.min_p < 1.0:
            raise ConfigError(f"min_p must be in [0, 1), got {self.min_p}")
        for name in ("temperature", "eval_temperature"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{name} must be > 0, got {value}")
        if self.warmup_updates < 0:
            raise ConfigError(f"warmup_updates must be >= 0, got {self.warmup_updates}")
        if self.epochs < 1 or self.minibatches < 1:
            raise ConfigError("epochs and minibatches must be >= 1")
        if self.minibatches > self.episodes_per_update:
            raise ConfigError("minibatches must not exceed episodes_per_update")
        if self.checkpoint_every < 0 or self.checkpoint_every_s < 0:
            raise ConfigError(
                "checkpoint_every (updates) and checkpoint_every_s (seconds) must be >= 0 (0: "
                f"off), got {self.checkpoint_every} and {self.checkpoint_every_s}"
            )
        if self.updates is None and self.time_budget_s is None:
            raise ConfigError("give a number of updates or a time budget (or both)")


SECTIONS: dict[str, tuple[str, ...]] = {
    "run": (
        "env_id",
        "env_kwargs",
        "out_dir",
        "seed",
        "updates",
        "time_budget_s",
        "checkpoint_every",
        "checkpoint_every_s",
        "device",
        "threads",
        "overlap",
    ),
    "policy": (
        "model",
        "n_layer",
        "n_embd",
        "n_head",
        "n_positions",
        "tokenizer",
        "lora_rank",
        "lora_alpha",
        "system_prompt",
        "max_new_tokens",
        "obs_max_tokens",
    ),
    "rl": (
        "estimator",
        "gamma",
        "episodes_per_update",
        "group_size",
        "lr",
        "lr_schedule",
        "warmup_updates",
        "max_grad_norm",
        "keep_errors",
    ),
    "ppo": ("epochs", "minibatches", "clip_eps", "dual_clip"),
    "entropy": (
        "entropy_coef",
        "entropy_ref_min",
        "entropy_turns",
        "entropy_schedule",
        "entropy_decay_until",
        "entropy_target",
        "entropy_target_lr",
    ),
    "kl": ("kl_coef", "kl_schedule", "kl_decay_until", "kl_estimator"),
    "sampling": ("temperature", "min_p", "eval_temperature"),
    "sft": ("sft_path", "init_checkpoint", "sft_steps", "sft_batch_size", "sft_lr"),
    "evaluation": ("eval_every", "eval_episodes", "final_eval_episodes", "final_eval_greedy"),
}
"""The fields of :class:`TrainConfig` grouped by what they control (every field once)."""


def config_from_dict(d: dict[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a dict, flat or nested by :data:`SECTIONS` (or both).

    ``{"rl": {"lr": 3e-4}, "kl": {"kl_coef": 0.01}, "env_id": "..."}`` and the flat
    ``{"lr": 3e-4, "kl_coef": 0.01, "env_id": "..."}`` give the same config, validated alike
    (:meth:`TrainConfig.sections` is the nested form). Unknown keys, a field under the wrong
    section and a field given twice are errors.
    """
    names = {f.name for f in fields(TrainConfig)}
    flat: dict[str, Any] = {}
    for key, value in d.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"section {key!r} must be a dict of its settings, got {value!r}")
            wrong = sorted(set(value) - set(SECTIONS[key]))
            if wrong:
                raise ConfigError(
                    f"{wrong} are not settings of section {key!r}; its settings: "
                    f"{list(SECTIONS[key])}"
                )
            items = list(value.items())
        else:
            items = [(key, value)]
        for name, v in items:
            if name in flat:
                raise ConfigError(f"training setting {name!r} is given twice")
            flat[name] = v
    unknown = set(flat) - names
    if unknown:
        raise ConfigError(
            f"unknown training settings {sorted(unknown)}; valid: {sorted(names)} "
            f"(or nested under the sections {list(SECTIONS)})"
        )
    return TrainConfig(**flat)
