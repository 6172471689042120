"""The trainer's settings: :class:`TrainConfig`, made of one typed section per thing it controls.

``config.run.env_id``, ``config.rl.gamma``, ``config.kl.coef``, ...: each section is a dataclass
that checks its own values when made (and in :meth:`validate`), raising
:class:`~gemgym.errors.ConfigError` that names the parameter (``rl.gamma must be in [0, 1],
got 1.5``); :class:`TrainConfig` checks what relates settings of different sections. Validation
never changes a value: what is derived from the values is a property
(:attr:`RLConfig.group_size_for_estimator`, :attr:`PPOConfig.dual_clip_bound`,
:attr:`EntropyConfig.target_range`).

The same fields make ``gemgym train``'s flags and its config file (TOML, one table per section):
see :mod:`gemgym.options`. :func:`config_from_dict` reads the nested form (the file's tables),
:meth:`TrainConfig.to_dict` gives it; :meth:`TrainConfig.from_flags` takes one keyword per
``gemgym train`` flag. Checkpoints and ``final.json`` written before the sections existed hold
the flat form of that time (``{"kl_coef": ..., "final_eval_episodes": ...}``):
:func:`migrate_flat_config` turns it into the nested one, and :func:`config_from_dict` does so
by itself when given a flat dict.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from gemgym.errors import ConfigError
from gemgym.options import build_config, config_options, option, to_nested
from gemgym.rl.trainer.codec import TOKENIZERS
from gemgym.rl.trainer.config_migration import (
    LEGACY_FLAT_NAMES as LEGACY_FLAT_NAMES,
    migrate_flat_config as migrate_flat_config,
)

__all__ = [
    "KL_ESTIMATORS",
    "LEGACY_FLAT_NAMES",
    "CheckpointConfig",
    "EntropyConfig",
    "EvalConfig",
    "KLConfig",
    "OptimConfig",
    "PPOConfig",
    "PolicyConfig",
    "RLConfig",
    "RunConfig",
    "SFTConfig",
    "SamplingConfig",
    "TrainConfig",
    "config_from_dict",
    "migrate_flat_config",
]

KL_ESTIMATORS = ("k3", "exact")
"""``kl.estimator``: GRPO's k3 on the sampled tokens, or the exact KL over the vocabulary at
every action token (:func:`~gemgym.rl.trainer.losses.exact_kl_penalty`)."""

SCHEDULES = ("constant", "linear")
"""The schedules of the entropy bonus and of the KL coefficient."""

LR_SCHEDULES = ("constant", "cosine")


class _Estimators:
    """The estimators of the reference trainer (no critic: not ``gae``), read on first use so
    that importing this module does not import numpy."""

    def _names(self) -> tuple[str, ...]:
        from gemgym.rl.advantages import ESTIMATORS

        return tuple(e for e in ESTIMATORS if e != "gae")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __len__(self) -> int:
        return len(self._names())


TRAIN_ESTIMATORS = _Estimators()
"""The advantage estimators the trainer takes (those of :mod:`gemgym.rl.advantages` but GAE)."""


class _Section:
    """What every section shares: its name in errors and a check run when it is made."""

    section: ClassVar[str]

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the parameter for a bad value."""

    def _error(self, name: str, message: str) -> ConfigError:
        return ConfigError(f"{self.section}.{name} {message}")

    def _check(self, name: str, ok: bool, requirement: str) -> None:
        if not ok:
            raise self._error(name, f"must be {requirement}, got {getattr(self, name)!r}")

    def _check_choice(self, name: str, choices: Any) -> None:
        self._check(name, getattr(self, name) in choices, f"one of {list(choices)}")


@dataclass
class RunConfig(_Section):
    """What to train on, for how long, where, on what hardware."""

    section: ClassVar[str] = "run"

    env_id: str = option("game:GuessTheNumber-v0-easy", help="the env to train on", positional=True)
    env_kwargs: dict[str, Any] = option(  # noqa: RUF009 - a dataclasses.field
        default_factory=dict,
        help="keyword arguments for the env, e.g. '{\"partial_credit\": false}'",
        parse=json.loads,
        metavar="JSON",
    )
    wrappers: str = option(
        "",
        help="wrappers around the env, by name, comma-separated (gemgym.wrappers.factory, e.g. "
        "'grid': the board alone as the observation)",
    )
    out_dir: str = option("runs/train", help="output folder", flag="--out")
    seed: int = option(0, help="seed of the model's initialisation, the episodes and sampling")
    updates: int | None = option(None, help="stop after N updates")
    time_budget_s: float | None = option(
        None,
        help="stop after S seconds (SFT included: it runs first, RL gets the rest)",
        flag="--time-budget",
        metavar="S",
    )
    device: str = option("auto", help="auto (GPU when present), cpu, cuda:0 ...")
    threads: int | None = option(None, help="torch CPU threads")
    overlap: bool = option(
        False,
        help="collect the next batch in a background thread while learning (2+ cores; each "
        "batch is one update old)",
    )

    def validate(self) -> None:
        self._check("env_id", isinstance(self.env_id, str) and bool(self.env_id), "an env id")
        self._check("env_kwargs", isinstance(self.env_kwargs, dict), "a dict")
        if self.wrappers:
            from gemgym.wrappers.factory import get_wrapper_fns

            try:  # an unknown name fails here, with the known ones
                get_wrapper_fns(self.wrappers)
            except ConfigError as e:
                raise ConfigError(f"{self.section}.wrappers: {e}") from None
        if self.updates is None and self.time_budget_s is None:
            raise ConfigError(
                "give a number of updates or a time budget (or both): run.updates or "
                "run.time_budget_s"
            )
        self._check("updates", self.updates is None or self.updates >= 0, ">= 0")
        self._check("time_budget_s", self.time_budget_s is None or self.time_budget_s > 0, "> 0")
        self._check("threads", self.threads is None or self.threads >= 1, ">= 1")


@dataclass
class PolicyConfig(_Section):
    """The model: the default small GPT (its shape and tokenizer) or a Hugging Face one."""

    section: ClassVar[str] = "policy"

    model: str | None = option(
        None,
        help="a Hugging Face causal LM (directory or Hub id) with a chat template, sampled and "
        "trained through gemgym.llm (default: a small GPT)",
    )
    n_layer: int = option(2, help="layers of the default model")
    n_embd: int = option(64, help="width of the default model")
    n_head: int = option(4, help="attention heads of the default model")
    n_positions: int = option(
        512, help="context length of the default model in tokens (a 7-turn game needs ~750 bytes)"
    )
    tokenizer: str = option(
        "bytes",
        help="tokenizer of the default model: bytes, or words (observations as hashed words)",
        choices=TOKENIZERS,
    )
    obs_max_tokens: int = option(128, help="tokens kept of each observation (default model)")
    lora_rank: int = option(
        0,
        help="with --model: train LoRA adapters of this rank instead of every weight (0: full "
        "fine-tuning; needs the peft extra)",
    )
    lora_alpha: int = option(16, help="LoRA scaling alpha")
    system_prompt: str | None = option(
        None, help="with --model: a system message before the first observation"
    )

    def validate(self) -> None:
        for name in ("n_layer", "n_embd", "n_head", "n_positions", "obs_max_tokens"):
            self._check(name, getattr(self, name) >= 1, ">= 1")
        self._check_choice("tokenizer", TOKENIZERS)
        self._check("lora_rank", self.lora_rank >= 0, ">= 0")
        self._check("lora_alpha", self.lora_alpha > 0, "> 0")
        if self.model is None:
            for name in ("lora_rank", "system_prompt"):
                if getattr(self, name):
                    raise self._error(
                        name, "is for a Hugging Face model: give one with policy.model too"
                    )
        else:
            if self.tokenizer != "bytes":
                raise self._error(
                    "tokenizer",
                    f"{self.tokenizer!r} is for the default model; a Hugging Face model "
                    "(policy.model) uses its own tokenizer",
                )


@dataclass
class RLConfig(_Section):
    """The RL objective: advantage estimator, discount, batch and group sizes."""

    section: ClassVar[str] = "rl"

    estimator: str = option("rebn", help="advantage estimator", choices=TRAIN_ESTIMATORS)
    gamma: float = option(0.9, help="discount")
    episodes_per_update: int = option(64, help="episodes collected per update")
    group_size: int | None = option(
        None, help="episodes per initial state (default: 8 for the group estimators, else 1)"
    )
    keep_errors: bool = option(
        False,
        help="train on failed episodes too (their env or model call broke; by default they are "
        "left out of the batch and counted in the log's errors)",
    )

    @property
    def group_size_for_estimator(self) -> int:
        """``group_size``, or when not given 8 for the group estimators and 1 for the others."""
        if self.group_size is not None:
            return self.group_size
        from gemgym.rl.advantages import GROUP_ESTIMATORS

        return 8 if self.estimator in GROUP_ESTIMATORS else 1

    def validate(self) -> None:
        if self.estimator not in TRAIN_ESTIMATORS:
            raise self._error(
                "estimator",
                f"must be one of {list(TRAIN_ESTIMATORS)} (the reference trainer has no "
                f"critic), got {self.estimator!r}",
            )
        self._check("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]")
        self._check("episodes_per_update", self.episodes_per_update >= 1, ">= 1")
        self._check("group_size", self.group_size is None or self.group_size >= 1, ">= 1")
        from gemgym.rl.advantages import GROUP_ESTIMATORS

        group = self.group_size_for_estimator
        if self.estimator in GROUP_ESTIMATORS and group < 2:
            raise self._error(
                "group_size", f"must be >= 2 for the estimator {self.estimator!r}, got {group}"
            )
        if self.episodes_per_update % group:
            raise self._error(
                "episodes_per_update", f"must be a multiple of rl.group_size ({group})"
            )


@dataclass
class OptimConfig(_Section):
    """The RL optimiser (AdamW): learning rate, its schedule, gradient clipping."""

    section: ClassVar[str] = "optim"

    lr: float = option(1e-3, help="RL learning rate")
    lr_schedule: str = option(
        "constant",
        help="cosine: decay the RL learning rate to 0 over the time budget (or the updates)",
        choices=LR_SCHEDULES,
    )
    warmup_updates: int = option(0, help="linear RL learning-rate warm-up (updates)")
    max_grad_norm: float = option(1.0, help="clip the gradient's norm to this (0: no clipping)")

    def validate(self) -> None:
        self._check("lr", self.lr >= 0, ">= 0")
        self._check_choice("lr_schedule", LR_SCHEDULES)
        self._check("warmup_updates", self.warmup_updates >= 0, ">= 0")
        self._check("max_grad_norm", self.max_grad_norm >= 0, ">= 0")


@dataclass
class PPOConfig(_Section):
    """Batch reuse: ``epochs * minibatches > 1`` steps on the clipped surrogate."""

    section: ClassVar[str] = "ppo"

    epochs: int = option(1, help="passes over each collected batch")
    minibatches: int = option(
        1, help="AdamW steps per pass (PPO-style clipped reuse when epochs*minibatches > 1)"
    )
    clip_eps: float = option(0.2, help="PPO ratio clip")
    dual_clip: float = option(3.0, help="bound of a negative-advantage token's ratio term (0: off)")

    @property
    def dual_clip_bound(self) -> float | None:
        """``dual_clip``, or ``None`` when it is 0 (off)."""
        return self.dual_clip or None

    def validate(self) -> None:
        self._check("epochs", self.epochs >= 1, ">= 1")
        self._check("minibatches", self.minibatches >= 1, ">= 1")
        self._check("clip_eps", self.clip_eps > 0, "> 0")
        self._check("dual_clip", self.dual_clip == 0 or self.dual_clip > 1.0, "> 1 (or 0: off)")


@dataclass
class EntropyConfig(_Section):
    """The entropy bonus: its coefficient, the tokens it applies to, its schedule or target."""

    section: ClassVar[str] = "entropy"
    flag_prefix: ClassVar[str] = "entropy_"

    coef: float = option(0.0, help="entropy bonus on the action tokens (0: none)")
    ref_min: float | None = option(
        None,
        help="apply the entropy bonus only to action tokens where the starting weights' entropy "
        "is at least this many nats (the moves, not the format they already fixed)",
    )
    turns: int | None = option(
        None,
        help="apply the entropy bonus only to the first K actions of each episode (the later "
        "turns' moves settle while the earlier ones explore)",
    )
    schedule: str = option(
        "constant", help="linear: the entropy bonus decays to 0 over the run", choices=SCHEDULES
    )
    decay_until: float = option(
        1.0,
        help="with --entropy-schedule linear: the share of the run where the bonus reaches 0",
    )
    target: tuple[float, float] | None = option(
        None,
        help="adapt the entropy bonus after every update so that the entropy (nats) of the "
        "tokens it applies to follows a line from START to END over the run; --entropy-coef "
        "is its starting value",
        metavar=("START", "END"),
    )
    target_lr: float = option(
        0.05, help="with --entropy-target: how fast the bonus's log moves per nat off the line"
    )

    @property
    def target_range(self) -> tuple[float, float] | None:
        """``target`` as two floats (it may be given as any pair of numbers), or ``None``."""
        if self.target is None:
            return None
        start, end = self.target
        return float(start), float(end)

    def validate(self) -> None:
        self._check("coef", self.coef >= 0, ">= 0")
        self._check("ref_min", self.ref_min is None or self.ref_min >= 0, ">= 0 (or None)")
        self._check("turns", self.turns is None or self.turns >= 1, ">= 1 (or None)")
        for name in ("ref_min", "turns"):
            if getattr(self, name) is not None and not self.coef:
                raise self._error(
                    name, "restricts the entropy bonus to some tokens: give entropy.coef > 0 too"
                )
        self._check_choice("schedule", SCHEDULES)
        self._check("decay_until", 0.0 < self.decay_until <= 1.0, "in (0, 1]")
        self._check("target_lr", self.target_lr > 0, "> 0")
        if self.target is None:
            return
        target = self.target
        if (
            not isinstance(target, (tuple, list))
            or len(target) != 2
            or not all(
                isinstance(h, (int, float)) and not isinstance(h, bool) and h >= 0 for h in target
            )
        ):
            raise self._error(
                "target", f"must be two entropies >= 0 in nats, (start, end), got {target!r}"
            )
        if not self.coef:
            raise self._error(
                "target", "adapts the entropy bonus from its starting value: give entropy.coef > 0"
            )
        if self.ref_min is None and self.turns is None:
            raise self._error(
                "target",
                "needs the tokens whose entropy it follows: give entropy.ref_min or entropy.turns",
            )
        if self.schedule != "constant":
            raise self._error("target", "sets the bonus itself: leave entropy.schedule 'constant'")


@dataclass
class KLConfig(_Section):
    """The KL penalty toward the weights RL starts from."""

    section: ClassVar[str] = "kl"
    flag_prefix: ClassVar[str] = "kl_"

    coef: float = option(
        0.0, help="KL penalty toward the weights RL starts from (GRPO's k3; 0: none)"
    )
    schedule: str = option(
        "constant", help="linear: the KL coefficient decays to 0 over the run", choices=SCHEDULES
    )
    decay_until: float = option(
        1.0,
        help="with --kl-schedule linear: the share of the run where the KL coefficient reaches 0",
    )
    estimator: str = option(
        "k3",
        help="k3: GRPO's estimator on the sampled tokens; exact: KL(ref || policy) over the "
        "whole vocabulary at every action token (no sampling noise: it also pulls back moves "
        "the policy no longer samples)",
        choices=KL_ESTIMATORS,
    )

    def validate(self) -> None:
        self._check("coef", self.coef >= 0, ">= 0")
        self._check_choice("schedule", SCHEDULES)
        self._check("decay_until", 0.0 < self.decay_until <= 1.0, "in (0, 1]")
        self._check_choice("estimator", KL_ESTIMATORS)
        if self.estimator != "k3" and not self.coef:
            raise self._error(
                "estimator",
                f"{self.estimator!r} chooses how the KL penalty is computed: give kl.coef > 0 too",
            )


@dataclass
class SamplingConfig(_Section):
    """How the training batches are sampled."""

    section: ClassVar[str] = "sampling"

    temperature: float = option(
        1.0, help="sampling temperature of the training batches (> 1 explores more)"
    )
    min_p: float = option(
        0.0,
        help="sample only tokens at least this times as likely as the best (0: all; default "
        "model only)",
    )
    max_new_tokens: int = option(16, help="tokens an action may have")

    def validate(self) -> None:
        self._check("temperature", self.temperature > 0, "> 0")
        self._check("min_p", 0.0 <= self.min_p < 1.0, "in [0, 1)")
        self._check("max_new_tokens", self.max_new_tokens >= 1, ">= 1")


@dataclass
class SFTConfig(_Section):
    """The weights RL starts from: a supervised warm start on recorded episodes, or a
    checkpoint's weights."""

    section: ClassVar[str] = "sft"
    flag_prefix: ClassVar[str] = "sft_"

    path: str | None = option(
        None, help="JSONL traces (gemgym run --out) for SFT", flag="--sft", metavar="JSONL"
    )
    init_checkpoint: str | None = option(
        None, help="start from a checkpoint's weights (instead of SFT)", flag="--init"
    )
    steps: int = option(300, help="SFT steps (they count toward --time-budget)")
    batch_size: int = option(64, help="episodes per SFT step")
    lr: float = option(1e-3, help="SFT learning rate")

    def validate(self) -> None:
        if self.path and self.init_checkpoint:
            raise self._error(
                "init_checkpoint", "(weights to start from) excludes sft.path: give one of them"
            )
        self._check("steps", self.steps >= 0, ">= 0")
        self._check("batch_size", self.batch_size >= 1, ">= 1")
        self._check("lr", self.lr >= 0, ">= 0")


@dataclass
class EvalConfig(_Section):
    """Evaluations on fresh episodes: every few updates, and at the end."""

    section: ClassVar[str] = "eval"
    flag_prefix: ClassVar[str] = "eval_"

    episodes: int = option(1000, help="episodes of the final evaluation (0: none)")
    greedy: bool = option(
        True,
        help="also evaluate with greedy decoding at the end",
        deprecated=("--final-eval-greedy",),
    )
    every: int = option(0, help="evaluate every N updates (0: never)")
    every_episodes: int = option(256, help="episodes of each --eval-every evaluation")
    temperature: float | None = option(
        None,
        help="sampling temperature of the evaluations (default: as the training batches are "
        "sampled, --temperature and --min-p)",
    )

    def validate(self) -> None:
        for name in ("episodes", "every", "every_episodes"):
            self._check(name, getattr(self, name) >= 0, ">= 0")
        self._check("temperature", self.temperature is None or self.temperature > 0, "> 0")


@dataclass
class CheckpointConfig(_Section):
    """How often the checkpoint and the curves are written (besides after SFT, at the end and
    on SIGINT/SIGTERM)."""

    section: ClassVar[str] = "checkpoint"
    flag_prefix: ClassVar[str] = "checkpoint_"

    every: int = option(25, help="save a checkpoint and the curves every N updates (0: off)")
    every_s: float = option(
        180.0,
        help="and whenever S seconds have passed since the last save, in SFT too (0: off)",
        metavar="S",
    )

    def validate(self) -> None:
        self._check("every", self.every >= 0, ">= 0 (0: off)")
        self._check("every_s", self.every_s >= 0, ">= 0 (0: off)")


@dataclass
class TrainConfig:
    """Everything a run depends on (saved in the checkpoint and in ``OUT/config.toml``).

    ``TrainConfig(run=RunConfig(updates=100), kl=KLConfig(coef=0.05))``: the run section has
    no default (a run needs ``updates`` or ``time_budget_s``), the others do.

    Each section checks its own values; this checks the settings that relate sections (the
    Hugging Face model and the default model's options, the minibatches and the batch)."""

    run: RunConfig
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    entropy: EntropyConfig = field(default_factory=EntropyConfig)
    kl: KLConfig = field(default_factory=KLConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    def __post_init__(self) -> None:
        self._validate_across()

    def validate(self) -> None:
        """Check every section again, then the settings across sections (a config changed
        after it was made: the trainer calls this)."""
        for f in fields(self):
            getattr(self, f.name).validate()
        self._validate_across()

    def _validate_across(self) -> None:
        if self.policy.model is not None and self.sampling.min_p:
            raise ConfigError(
                "sampling.min_p is for the default model; a Hugging Face model (policy.model) "
                "samples through gemgym.llm (temperature, max_new_tokens): drop it"
            )
        if self.ppo.minibatches > self.rl.episodes_per_update:
            raise ConfigError(
                f"ppo.minibatches must not exceed rl.episodes_per_update, got "
                f"{self.ppo.minibatches} > {self.rl.episodes_per_update}"
            )

    # -- other forms -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The nested form, as the config file holds it: ``{"kl": {"coef": 0.0, ...}, ...}``
        (``None`` values left out, tuples as lists); :func:`config_from_dict` reads it back."""
        return to_nested(self)

    @classmethod
    def from_flags(cls, **flags: Any) -> TrainConfig:
        """A config from one keyword per ``gemgym train`` flag (``kl_coef=0.05`` for
        ``--kl-coef 0.05``, ``out="runs/x"`` for ``--out``, ``env_id`` for the positional
        argument): the command line's names, in Python."""
        by_flag = {_flag_keyword(o.flag): o for o in config_options(cls)}
        by_flag["env_id"] = by_flag.pop("ENV_ID")
        nested: dict[str, dict[str, Any]] = {}
        for key, value in flags.items():
            if key not in by_flag:
                raise ConfigError(
                    f"{key!r} is not a gemgym train flag; the flags, as keywords: {sorted(by_flag)}"
                )
            opt = by_flag[key]
            nested.setdefault(opt.section, {})[opt.name] = value
        return config_from_dict(nested)


def _flag_keyword(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _is_flat(d: Mapping[str, Any]) -> bool:
    sections = {f.name for f in fields(TrainConfig)}
    return bool(d) and not set(d) & sections and set(d) <= set(LEGACY_FLAT_NAMES)


def config_from_dict(d: Mapping[str, Any]) -> TrainConfig:
    """A validated :class:`TrainConfig` from its nested form (``{"rl": {"gamma": 0.9}, ...}``,
    the config file's tables; sections and settings left out keep their defaults), or from the
    flat form of the checkpoints written before the sections (:func:`migrate_flat_config`).

    Unknown sections and settings are errors that name them; each value is checked against its
    field's type (an int is taken for a float, a list for a tuple)."""
    nested = migrate_flat_config(d) if _is_flat(d) else d
    config: TrainConfig = build_config(TrainConfig, nested)
    return config


SECTIONS: dict[str, tuple[str, ...]] = {
    f.name: tuple(g.name for g in fields(typing.get_type_hints(TrainConfig)[f.name]))
    for f in fields(TrainConfig)
}
"""Each section of :class:`TrainConfig` and the names of its settings."""
