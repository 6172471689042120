"""``gemgym train ID``: SFT warm start (optional) then on-policy RL with a causal-LM policy.

Example::

    gemgym run game:GuessTheNumber-v0-easy --agent random --episodes 2000 --out random.jsonl
    gemgym train game:GuessTheNumber-v0-easy --sft random.jsonl --estimator rebn --gamma 0.9 \\
        --time-budget 1200 --out runs/rebn

Needs the ``train`` extra (torch, transformers, matplotlib). Writes ``curves.csv``,
``curves.png``, ``checkpoint.pt`` and ``final.json`` in ``--out``; ``--resume`` continues a run
(an error when ``--out`` holds no checkpoint). Ctrl-C (SIGINT) or SIGTERM saves a checkpoint
and the curves after the current SFT step or update and prints the command that resumes; the
checkpoint and the curves are also written every ``--checkpoint-every`` updates and every
``--checkpoint-every-s`` seconds.

The flags are made from the fields of :class:`~gemgym.rl.trainer.TrainConfig`: :data:`FLAGS`
names each field's flag and help; its type and default come from the field. ``--help`` lists
them in the config's :data:`~gemgym.rl.trainer.config.SECTIONS`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

from gemgym.errors import ConfigError
from gemgym.rl.trainer.codec import TOKENIZERS
from gemgym.rl.trainer.config import KL_ESTIMATORS, SECTIONS, TrainConfig

__all__ = ["FLAGS", "Flag", "add_arguments", "config_from_args", "resume_command", "run"]


class _Estimators:
    """The estimators of the reference trainer (no critic: not ``gae``), read on first use so
    that building the parser does not import numpy."""

    def _names(self) -> tuple[str, ...]:
        from gemgym.rl.advantages import ESTIMATORS

        return tuple(e for e in ESTIMATORS if e != "gae")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __len__(self) -> int:
        return len(self._names())


@dataclass(frozen=True)
class Flag:
    """How one :class:`TrainConfig` field appears on the command line."""

    flag: str
    help: str | None = None
    choices: Any = None
    metavar: str | tuple[str, ...] | None = None
    convert: Callable[[str], Any] | None = None
    """The argument's type when the field's own (int, float, str) does not fit."""
    to_config: Callable[[Any], Any] | None = None
    """The config's value from the parsed one, when they differ (e.g. 0 for ``None``)."""
    default: Any = None
    """The flag's default when it is not the field's (with ``own_default``)."""
    own_default: bool = False


FLAGS: dict[str, Flag] = {
    # run
    "env_kwargs": Flag(
        "--env-kwargs",
        "keyword arguments for the env, e.g. '{\"partial_credit\": false}'",
        convert=json.loads,
        metavar="JSON",
    ),
    "out_dir": Flag("--out", "output folder (default runs/train)"),
    "seed": Flag("--seed"),
    "updates": Flag("--updates", "stop after N updates"),
    "time_budget_s": Flag(
        "--time-budget",
        "stop after S seconds (SFT included: it runs first, RL gets the rest)",
    ),
    "checkpoint_every": Flag(
        "--checkpoint-every",
        "save a checkpoint and the curves every N updates (default 25; 0: not by updates)",
    ),
    "checkpoint_every_s": Flag(
        "--checkpoint-every-s",
        "and at least every S seconds, in SFT too (default 180; 0: not by time)",
    ),
    "device": Flag("--device", "auto (GPU when present), cpu, cuda:0 ..."),
    "threads": Flag("--threads", "torch CPU threads"),
    "overlap": Flag(
        "--overlap",
        "collect the next batch in a background thread while learning (2+ cores; each "
        "batch is one update old)",
    ),
    "keep_errors": Flag(
        "--keep-errors",
        "train on failed episodes too (their env or model call broke; by default they are "
        "left out of the batch and counted in the log's errors)",
    ),
    # model
    "model": Flag(
        "--model",
        "a Hugging Face causal LM (directory or Hub id) with a chat template, sampled and "
        "trained through gemgym.llm (default: a small GPT)",
    ),
    "n_layer": Flag("--n-layer"),
    "n_embd": Flag("--n-embd"),
    "n_head": Flag("--n-head"),
    "n_positions": Flag(
        "--n-positions",
        "context length of the default model in tokens (a 7-turn game needs ~750 bytes)",
    ),
    "tokenizer": Flag(
        "--tokenizer",
        "tokenizer of the default model: bytes, or words (observations as hashed words)",
        choices=TOKENIZERS,
    ),
    "lora_rank": Flag(
        "--lora-rank",
        "with --model: train LoRA adapters of this rank instead of every weight (0: full "
        "fine-tuning; needs the peft extra)",
    ),
    "lora_alpha": Flag("--lora-alpha", "LoRA scaling alpha (default 16)"),
    "system_prompt": Flag(
        "--system-prompt", "with --model: a system message before the first observation"
    ),
    "max_new_tokens": Flag("--max-new-tokens", "tokens an action may have"),
    "obs_max_tokens": Flag("--obs-max-tokens", "tokens kept of each observation"),
    # rl
    "estimator": Flag("--estimator", "advantage estimator (default rebn)", choices=_Estimators()),
    "gamma": Flag("--gamma", "discount (default 0.9)"),
    "episodes_per_update": Flag("--episodes-per-update"),
    "group_size": Flag(
        "--group-size",
        "episodes per initial state (default 8 for the group estimators, else 1)",
        own_default=True,
    ),
    "lr": Flag("--lr"),
    "lr_schedule": Flag(
        "--lr-schedule",
        "cosine: decay the RL learning rate to 0 over the time budget (or the updates)",
        choices=("constant", "cosine"),
    ),
    "warmup_updates": Flag("--warmup-updates", "linear RL learning-rate warm-up (updates)"),
    "max_grad_norm": Flag("--max-grad-norm", "clip the gradient's norm to this (0: no clipping)"),
    # ppo
    "epochs": Flag("--epochs", "passes over each collected batch (default 1)"),
    "minibatches": Flag(
        "--minibatches",
        "AdamW steps per pass (PPO-style clipped reuse when epochs*minibatches > 1)",
    ),
    "clip_eps": Flag("--clip-eps", "PPO ratio clip (default 0.2)"),
    "dual_clip": Flag(
        "--dual-clip",
        "bound of a negative-advantage token's ratio term (default 3; 0 turns it off)",
        to_config=lambda v: v or None,
    ),
    # entropy
    "entropy_coef": Flag("--entropy-coef", "entropy bonus on the action tokens (default 0: none)"),
    "entropy_ref_min": Flag(
        "--entropy-ref-min",
        "apply the entropy bonus only to action tokens where the starting weights' entropy "
        "is at least this many nats (the moves, not the format they already fixed)",
    ),
    "entropy_turns": Flag(
        "--entropy-turns",
        "apply the entropy bonus only to the first K actions of each episode (the later "
        "turns' moves settle while the earlier ones explore)",
    ),
    "entropy_schedule": Flag(
        "--entropy-schedule",
        "linear: the entropy bonus decays to 0 over the run (default constant)",
        choices=("constant", "linear"),
    ),
    "entropy_decay_until": Flag(
        "--entropy-decay-until",
        "with --entropy-schedule linear: the share of the run where the bonus reaches 0 "
        "(default 1: the end)",
    ),
    "entropy_target": Flag(
        "--entropy-target",
        "adapt the entropy bonus after every update so that the entropy (nats) of the "
        "tokens it applies to follows a line from START to END over the run; --entropy-coef "
        "is its starting value",
        metavar=("START", "END"),
        to_config=lambda v: tuple(v) if v else None,
    ),
    "entropy_target_lr": Flag(
        "--entropy-target-lr",
        "with --entropy-target: how fast the bonus's log moves per nat off the line (default 0.05)",
    ),
    # kl
    "kl_coef": Flag(
        "--kl-coef",
        "KL penalty toward the weights RL starts from (GRPO's k3; default 0: none)",
    ),
    "kl_schedule": Flag(
        "--kl-schedule",
        "linear: the KL coefficient decays to 0 over the run (default constant)",
        choices=("constant", "linear"),
    ),
    "kl_decay_until": Flag(
        "--kl-decay-until",
        "with --kl-schedule linear: the share of the run where the KL coefficient "
        "reaches 0 (default 1: the end)",
    ),
    "kl_estimator": Flag(
        "--kl-estimator",
        "k3: GRPO's estimator on the sampled tokens (default); exact: KL(ref || policy) "
        "over the whole vocabulary at every action token (no sampling noise: it also pulls "
        "back moves the policy no longer samples)",
        choices=KL_ESTIMATORS,
    ),
    # sampling
    "temperature": Flag(
        "--temperature",
        "sampling temperature of the training batches (default 1; > 1 explores more)",
    ),
    "min_p": Flag(
        "--min-p",
        "sample only tokens at least this times as likely as the best (default 0: all)",
    ),
    "eval_temperature": Flag(
        "--eval-temperature",
        "sampling temperature of the evaluations (default: --temperature)",
    ),
    # sft
    "sft_path": Flag("--sft", "JSONL traces (gemgym run --out) for SFT"),
    "init_checkpoint": Flag("--init", "start from a checkpoint's weights"),
    "sft_steps": Flag("--sft-steps", "SFT steps (they count toward --time-budget)"),
    "sft_batch_size": Flag("--sft-batch-size", "episodes per SFT step"),
    "sft_lr": Flag("--sft-lr", "SFT learning rate"),
    # evaluation
    "eval_every": Flag("--eval-every", "evaluate every N updates"),
    "eval_episodes": Flag("--eval-every-episodes", "episodes of each --eval-every evaluation"),
    "final_eval_episodes": Flag("--eval-episodes", "final evaluation episodes"),
    "final_eval_greedy": Flag(
        "--final-eval-greedy", "also evaluate with greedy decoding at the end"
    ),
}
"""Each :class:`TrainConfig` field but ``env_id`` (the positional argument): its flag."""

_CONFIG_TYPES = typing.get_type_hints(TrainConfig)


def _base_type(field_name: str) -> tuple[Any, int | None]:
    """The argparse type of a field and its ``nargs`` (``X | None`` is ``X``; a tuple of
    floats is ``float`` with one argument per item)."""
    tp = _CONFIG_TYPES[field_name]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = args[0]
    if typing.get_origin(tp) is tuple:
        items = typing.get_args(tp)
        return items[0], len(items)
    return tp, None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym train``: ``env_id``, one flag per :data:`FLAGS` entry (grouped
    as the config's sections), ``--resume`` and ``--quiet``."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    for section, names in SECTIONS.items():
        group = p.add_argument_group(section)
        for name in names:
            if name not in FLAGS:
                continue
            flag = FLAGS[name]
            default = flag.default if flag.own_default else defaults[name]
            kwargs: dict[str, Any] = {"dest": name, "default": default, "help": flag.help}
            tp, nargs = _base_type(name)
            if tp is bool:
                kwargs["action"] = argparse.BooleanOptionalAction if default else "store_true"
            else:
                kwargs["type"] = flag.convert or tp
                if nargs is not None:
                    kwargs["nargs"] = nargs
                if flag.choices is not None:
                    kwargs["choices"] = flag.choices
                if flag.metavar is not None:
                    kwargs["metavar"] = flag.metavar
                elif flag.choices is None:
                    kwargs["metavar"] = flag.flag.lstrip("-").upper().replace("-", "_")
                if flag.help is None:
                    kwargs["help"] = "(default %(default)s)"
            group.add_argument(flag.flag, **kwargs)
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUT/checkpoint.pt (an error when there is none)",
    )
    p.add_argument("--quiet", action="store_true", help="no per-update log")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed ``gemgym train`` arguments (not yet validated)."""
    from gemgym.rl.advantages import GROUP_ESTIMATORS

    values: dict[str, Any] = {"env_id": args.env_id}
    for name, flag in FLAGS.items():
        value = getattr(args, name)
        values[name] = flag.to_config(value) if flag.to_config is not None else value
    if values["group_size"] is None:
        values["group_size"] = 8 if values["estimator"] in GROUP_ESTIMATORS else 1
    return TrainConfig(**values)


def resume_command(config: TrainConfig) -> str:
    """The ``gemgym train`` command that continues ``config``'s run: its env, every flag whose
    value differs from the default, and ``--resume`` (shell-quoted)."""
    from gemgym.rl.advantages import GROUP_ESTIMATORS

    defaults = {f.name: f.default for f in fields(TrainConfig)}
    defaults["group_size"] = 8 if config.estimator in GROUP_ESTIMATORS else 1
    argv = ["gemgym", "train", config.env_id]
    for name, flag in FLAGS.items():
        value = getattr(config, name)
        if value == defaults[name] or (name == "out_dir" and value is None):
            continue
        tp, nargs = _base_type(name)
        if tp is bool:
            argv.append(flag.flag if value else "--no-" + flag.flag.removeprefix("--"))
        elif value is None:  # only dual_clip turns None from a given value (0)
            argv += [flag.flag, "0"]
        elif nargs is not None:
            argv += [flag.flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [flag.flag, json.dumps(value)]
        else:
            argv += [flag.flag, str(value)]
    return shlex.join([*argv, "--resume"])


def run(args: argparse.Namespace) -> int:
    """Train and print the final evaluation; on SIGINT/SIGTERM, save and print how to resume
    (exit status 128 + the signal's number)."""
    try:
        from gemgym.rl.trainer import Trainer
        from gemgym.rl.trainer.interrupt import TrainingInterrupted
    except ImportError as e:
        from gemgym.errors import missing_dependency

        raise missing_dependency(e.name or "torch", "train") from e
    from gemgym.registry import spec

    spec(args.env_id)
    if args.updates is None and args.time_budget_s is None:
        raise ConfigError("give --updates N or --time-budget SECONDS")
    cfg = config_from_args(args)
    trainer = Trainer(cfg, log=None if args.quiet else print)
    try:
        final = trainer.run(resume=args.resume)
    except TrainingInterrupted as stop:
        print(f"gemgym: {stop.message}", file=sys.stderr)
        print(f"resume with:\n  {resume_command(cfg)}", file=sys.stderr)
        return stop.exit_status
    ev = final.get("eval", {})
    print(
        f"{final['updates']} updates in {final['train_time_s']} s; eval on "
        f"{ev.get('episodes', 0)} episodes: success {ev.get('success_rate', 0):.1%}, "
        f"mean turns {ev.get('mean_turns', 0):.2f}; results in {cfg.out_dir}"
    )
    if "eval_greedy" in final:
        g = final["eval_greedy"]
        print(
            f"greedy decoding: success {g.get('success_rate', 0):.1%}, "
            f"mean turns {g.get('mean_turns', 0):.2f}"
        )
    return 0
