"""``gemgym train [ENV]``: SFT warm start (optional) then on-policy RL with a causal-LM policy.

Example::

    gemgym run game:GuessTheNumber-v0-easy --agent random --episodes 2000 --out random.jsonl
    gemgym train game:GuessTheNumber-v0-easy --sft random.jsonl --estimator rebn --gamma 0.9 \\
        --time-budget 1200 --out runs/rebn
    gemgym train --config runs/rebn/config.toml --resume

Needs the ``train`` extra (torch, transformers, matplotlib). Writes ``config.toml`` (every
setting of the run), ``curves.csv``, ``curves.png``, ``checkpoint.pt`` and ``final.json`` in
``--out``; ``--resume`` continues a run (an error when ``--out`` holds no checkpoint). Ctrl-C
(SIGINT) or SIGTERM saves a checkpoint and the curves after the current SFT step or update and
prints the command that resumes; the checkpoint and the curves are also written every
``--checkpoint-every`` updates and every ``--checkpoint-every-s`` seconds.

Every flag is made from a field of :class:`~gemgym.rl.trainer.TrainConfig`'s sections
(:mod:`gemgym.options`): its name, type, default, choices and help, one argument group per
section. ``--config FILE.toml`` reads settings from a file with the same sections (as
``OUT/config.toml`` holds them); the flags given override the file's values. Errors name
parameters as ``section.name``; this command shows them as their flags.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from gemgym.cli.shared import ENV, EPISODES, OUTPUT, RESUME, TITLES, names_as_flags, read_shared
from gemgym.errors import ConfigError, GemGymError
from gemgym.options import (
    Option,
    add_option_groups,
    config_options,
    flags_in_message,
    load_toml,
    merge_nested,
    rebase,
    values_from_args,
)
from gemgym.rl.trainer.config import TrainConfig, config_from_dict

__all__ = ["OPTIONS", "add_arguments", "config_from_args", "resume_command", "run"]

SHARED: dict[str, Option] = {
    "run.env_kwargs": next(o for o in ENV if o.name == "env_kwargs"),
    "run.wrappers": next(o for o in ENV if o.name == "wrappers"),
    "run.seed": next(o for o in EPISODES if o.name == "seed"),
    "run.out_dir": next(o for o in OUTPUT if o.name == "out"),
}
"""The settings of :class:`TrainConfig` that ``run``, ``eval`` and ``serve`` take too: their
flags are the shared ones (:mod:`gemgym.cli.shared`), one flag with one meaning."""

OPTIONS: tuple[Option, ...] = tuple(
    replace(rebase(SHARED[o.path], o.path), default=o.default) if o.path in SHARED else o
    for o in config_options(TrainConfig)
)
"""The options of every section of :class:`TrainConfig`: one flag each (the env id is the
positional argument); those in :data:`SHARED` with the shared flag, help and group, and the
config's default (``--out``'s shared help names train's, ``runs/train``)."""

SECTION_TITLES = {
    "run": "run (env, length, output, hardware)",
    "policy": "policy (the model)",
    "rl": "rl (the objective)",
    "optim": "optim (the RL optimiser)",
    "ppo": "ppo (batch reuse)",
    "entropy": "entropy (the entropy bonus)",
    "kl": "kl (the KL penalty toward the starting weights)",
    "sampling": "sampling (the training batches)",
    "sft": "sft (the weights RL starts from)",
    "eval": "eval (evaluations on fresh episodes)",
    "checkpoint": "checkpoint (periodic saves)",
    **TITLES,
}


def add_arguments(p: argparse.ArgumentParser, *, shared: Sequence[Option] = ()) -> None:
    """Arguments of ``gemgym train``: ``--config``, one flag per option of :data:`OPTIONS`
    (and of ``shared``, option groups other commands take too) grouped by section,
    ``--resume`` and ``--quiet``."""
    p.add_argument(
        "--config",
        metavar="TOML",
        help="settings from a TOML file, one table per section below (as OUT/config.toml "
        "holds them); the flags given override its values",
    )
    p.add_argument("--quiet", action="store_true", help="no per-update log")
    add_option_groups(p, [*OPTIONS, *RESUME, *shared], titles=SECTION_TITLES)


def _cli_text(text: str, args: argparse.Namespace) -> str:
    """``text`` (an error, a warning or a log line of the trainer) with the settings it names
    (``section.name``) written as this command's flags (with a config file, as the file's
    ``section.name`` too)."""
    keep_names = bool(getattr(args, "config", None))
    return flags_in_message(text, OPTIONS, keep_names=keep_names)


RUN_PARAMETERS = {"resume": "--resume"}
"""The parameters of :meth:`Trainer.run <gemgym.rl.trainer.Trainer.run>` its errors name,
and this command's flags for them."""


def _cli_error(e: GemGymError, args: argparse.Namespace) -> GemGymError:
    """``e`` (an error of the trainer or its config) with the settings and the parameters of
    :meth:`Trainer.run` it names written as this command's flags; of the same class when that
    class takes a message alone."""
    text = names_as_flags(_cli_text(str(e), args), RUN_PARAMETERS, last=True)
    if text == str(e):
        return e
    try:
        return type(e)(text)
    except TypeError:  # a class made from more than a message
        return GemGymError(text)


@contextlib.contextmanager
def _flags_in_warnings(args: argparse.Namespace) -> Iterator[None]:
    """While training, warnings are shown with the settings they name as this command's
    flags."""
    show = warnings.showwarning

    def shown(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
        show(_cli_text(str(message), args), category, *rest, **kw)

    warnings.showwarning = shown
    try:
        yield
    finally:
        warnings.showwarning = show


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed ``gemgym train`` arguments: the defaults, under the
    ``--config`` file's values, under the flags given (validated; errors name the flags)."""
    try:
        nested: dict[str, Any] = load_toml(args.config) if getattr(args, "config", None) else {}
        given = values_from_args(args, OPTIONS)
        return config_from_dict(merge_nested(nested, given))
    except ConfigError as e:
        raise _cli_error(e, args) from None


def resume_command(config: TrainConfig) -> str:
    """The ``gemgym train`` command that continues ``config``'s run: its env, every flag whose
    value differs from the default, and ``--resume`` (shell-quoted)."""
    argv = ["gemgym", "train", config.run.env_id]
    for opt in OPTIONS:
        if opt.meta.positional:
            continue
        value = getattr(getattr(config, opt.section), opt.name)
        if value == opt.default or value is None:
            continue
        if opt.base_type is bool:
            argv.append(opt.flag if value else "--no-" + opt.flag.removeprefix("--"))
        elif isinstance(value, (tuple, list)):
            argv += [opt.flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [opt.flag, json.dumps(value)]
        else:
            argv += [opt.flag, str(value)]
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

    read_shared(args, RESUME)
    cfg = config_from_args(args)
    spec(cfg.run.env_id)

    def log(line: str) -> None:
        print(_cli_text(line, args))

    try:
        with _flags_in_warnings(args):
            trainer = Trainer(cfg, log=None if args.quiet else log)
            final = trainer.run(resume=args.resume)
    except TrainingInterrupted as stop:
        print(f"gemgym: {stop.message}", file=sys.stderr)
        print(f"resume with:\n  {resume_command(cfg)}", file=sys.stderr)
        print(f"or:\n  gemgym train --config {trainer.config_path} --resume", file=sys.stderr)
        return stop.exit_status
    except GemGymError as e:
        raise _cli_error(e, args) from None
    done = f"{final['updates']} updates in {final['train_time_s']} s"
    if "eval" in final:  # none with --eval-episodes 0
        ev = final["eval"]
        done += (
            f"; eval on {ev['episodes']} episodes: success {ev['success_rate']:.1%}, "
            f"mean turns {ev['mean_turns']:.2f}"
        )
    print(f"{done}; results in {cfg.run.out_dir}")
    if "eval_greedy" in final:
        g = final["eval_greedy"]
        print(
            f"greedy decoding: success {g.get('success_rate', 0):.1%}, "
            f"mean turns {g.get('mean_turns', 0):.2f}"
        )
    return 0
