"""``gemgym train``'s flags are made from TrainConfig's section fields and parse as the
hand-written ones did (through the migration of the flat config they made); ``--config``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gemgym.cli.shared import RESUME, read_shared
from gemgym.cli.train import OPTIONS, add_arguments, config_from_args
from gemgym.errors import ConfigError
from gemgym.options import DeprecatedOptionWarning, merge_nested, values_from_args
from gemgym.rl.trainer.config import (
    SECTIONS,
    TrainConfig,
    config_from_dict,
    migrate_flat_config,
)

ENV = "game:GuessTheNumber-v0-easy"


def _old_add_arguments(p: argparse.ArgumentParser) -> None:
    """``gemgym train``'s arguments as they were declared by hand (before the flags were made
    from the config's fields)."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")
    p.add_argument(
        "--env-kwargs",
        type=json.loads,
        default=None,
        metavar="JSON",
        help="keyword arguments for the env, e.g. '{\"partial_credit\": false}'",
    )
    p.add_argument("--out", default="runs/train", help="output folder (default runs/train)")
    p.add_argument(
        "--estimator",
        default="rebn",
        choices=["rebn", "rebn_group", "reinforce", "grpo", "drgrpo", "rloo"],
        help="advantage estimator (default rebn)",
    )
    p.add_argument("--gamma", type=float, default=0.9, help="discount (default 0.9)")
    p.add_argument("--group-size", type=int, default=None, help="episodes per initial state")
    p.add_argument("--episodes-per-update", type=int, default=64)
    p.add_argument("--updates", type=int, default=None, help="stop after N updates")
    p.add_argument("--time-budget", type=float, default=None, help="stop after S seconds")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument(
        "--lr-schedule",
        choices=["constant", "cosine"],
        default="constant",
        help="cosine: decay the RL learning rate to 0 over the time budget (or the updates)",
    )
    p.add_argument(
        "--warmup-updates", type=int, default=0, help="linear RL learning-rate warm-up (updates)"
    )
    p.add_argument(
        "--epochs", type=int, default=1, help="passes over each collected batch (default 1)"
    )
    p.add_argument(
        "--minibatches",
        type=int,
        default=1,
        help="AdamW steps per pass (PPO-style clipped reuse when epochs*minibatches > 1)",
    )
    p.add_argument("--clip-eps", type=float, default=0.2, help="PPO ratio clip (default 0.2)")
    p.add_argument(
        "--dual-clip",
        type=float,
        default=3.0,
        help="bound of a negative-advantage token's ratio term (default 3; 0 turns it off)",
    )
    p.add_argument(
        "--entropy-coef",
        type=float,
        default=0.0,
        help="entropy bonus on the action tokens (default 0: none)",
    )
    p.add_argument(
        "--entropy-ref-min",
        type=float,
        default=None,
        help="apply the entropy bonus only to action tokens where the starting weights' entropy "
        "is at least this many nats (the moves, not the format they already fixed)",
    )
    p.add_argument(
        "--entropy-turns",
        type=int,
        default=None,
        help="apply the entropy bonus only to the first K actions of each episode (the later "
        "turns' moves settle while the earlier ones explore)",
    )
    p.add_argument(
        "--entropy-schedule",
        default="constant",
        choices=["constant", "linear"],
        help="linear: the entropy bonus decays to 0 over the run (default constant)",
    )
    p.add_argument(
        "--entropy-decay-until",
        type=float,
        default=1.0,
        help="with --entropy-schedule linear: the share of the run where the bonus reaches 0 "
        "(default 1: the end)",
    )
    p.add_argument(
        "--entropy-target",
        type=float,
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="adapt the entropy bonus after every update so that the entropy (nats) of the "
        "tokens it applies to follows a line from START to END over the run; --entropy-coef "
        "is its starting value",
    )
    p.add_argument(
        "--entropy-target-lr",
        type=float,
        default=0.05,
        help="with --entropy-target: how fast the bonus's log moves per nat off the line "
        "(default 0.05)",
    )
    p.add_argument(
        "--kl-coef",
        type=float,
        default=0.0,
        help="KL penalty toward the weights RL starts from (GRPO's k3; default 0: none)",
    )
    p.add_argument(
        "--kl-schedule",
        default="constant",
        choices=["constant", "linear"],
        help="linear: the KL coefficient decays to 0 over the run (default constant)",
    )
    p.add_argument(
        "--kl-decay-until",
        type=float,
        default=1.0,
        help="with --kl-schedule linear: the share of the run where the KL coefficient "
        "reaches 0 (default 1: the end)",
    )
    p.add_argument(
        "--kl-estimator",
        default="k3",
        choices=["k3", "exact"],
        help="k3: GRPO's estimator on the sampled tokens (default); exact: KL(ref || policy) "
        "over the whole vocabulary at every action token (no sampling noise: it also pulls "
        "back moves the policy no longer samples)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of the training batches (default 1; > 1 explores more)",
    )
    p.add_argument(
        "--min-p",
        type=float,
        default=0.0,
        help="sample only tokens at least this times as likely as the best (default 0: all)",
    )
    p.add_argument(
        "--eval-temperature",
        type=float,
        default=None,
        help="sampling temperature of the evaluations (default: --temperature)",
    )
    p.add_argument("--init", dest="init_checkpoint", help="start from a checkpoint's weights")
    p.add_argument("--sft", dest="sft_path", help="JSONL traces (gemgym run --out) for SFT")
    p.add_argument("--sft-steps", type=int, default=300)
    p.add_argument("--model", default=None, help="Hugging Face model path (default: small GPT)")
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument(
        "--n-positions",
        type=int,
        default=512,
        help="context length of the default model in tokens (a 7-turn game needs ~750 bytes)",
    )
    p.add_argument(
        "--tokenizer",
        choices=["bytes", "words"],
        default="bytes",
        help="tokenizer of the default model: bytes, or words (observations as hashed words)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=0, help="evaluate every N updates")
    p.add_argument("--eval-episodes", type=int, default=1000, help="final evaluation episodes")
    p.add_argument("--device", default="auto", help="auto (GPU when present), cpu, cuda:0 ...")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--overlap",
        action="store_true",
        help="collect the next batch in a background thread while learning (2+ cores; each "
        "batch is one update old)",
    )
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--quiet", action="store_true", help="no per-update log")


def _old_config(args: argparse.Namespace) -> dict[str, Any]:
    """The flat config the hand-written mapping made of the old arguments (its keyword
    arguments of the flat ``TrainConfig``; the fields it left out had their defaults)."""
    from gemgym.rl.advantages import GROUP_ESTIMATORS

    group = args.group_size
    if group is None:
        group = 8 if args.estimator in GROUP_ESTIMATORS else 1
    return dict(
        env_id=args.env_id,
        env_kwargs=args.env_kwargs,
        out_dir=args.out,
        estimator=args.estimator,
        gamma=args.gamma,
        model=args.model,
        n_layer=args.n_layer,
        n_embd=args.n_embd,
        n_head=args.n_head,
        n_positions=args.n_positions,
        tokenizer=args.tokenizer,
        seed=args.seed,
        episodes_per_update=args.episodes_per_update,
        group_size=group,
        lr=args.lr,
        warmup_updates=args.warmup_updates,
        lr_schedule=args.lr_schedule,
        epochs=args.epochs,
        minibatches=args.minibatches,
        clip_eps=args.clip_eps,
        dual_clip=args.dual_clip or None,
        entropy_coef=args.entropy_coef,
        entropy_ref_min=args.entropy_ref_min,
        entropy_turns=args.entropy_turns,
        kl_schedule=args.kl_schedule,
        kl_decay_until=args.kl_decay_until,
        kl_estimator=args.kl_estimator,
        entropy_schedule=args.entropy_schedule,
        entropy_decay_until=args.entropy_decay_until,
        entropy_target=tuple(args.entropy_target) if args.entropy_target else None,
        entropy_target_lr=args.entropy_target_lr,
        kl_coef=args.kl_coef,
        temperature=args.temperature,
        min_p=args.min_p,
        eval_temperature=args.eval_temperature,
        init_checkpoint=args.init_checkpoint,
        updates=args.updates,
        time_budget_s=args.time_budget,
        sft_path=args.sft_path,
        sft_steps=args.sft_steps,
        eval_every=args.eval_every,
        final_eval_episodes=args.eval_episodes,
        device=args.device,
        threads=args.threads,
        overlap=args.overlap,
    )


def _parse(add: object, argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add(p)  # type: ignore[operator]
    return p.parse_args(argv)


EVERY_OLD_FLAG = [
    ENV,
    "--env-kwargs",
    '{"partial_credit": false}',
    "--out",
    "runs/x",
    "--estimator",
    "grpo",
    "--gamma",
    "0.5",
    "--group-size",
    "4",
    "--episodes-per-update",
    "16",
    "--updates",
    "7",
    "--time-budget",
    "120.5",
    "--lr",
    "0.002",
    "--lr-schedule",
    "cosine",
    "--warmup-updates",
    "3",
    "--epochs",
    "2",
    "--minibatches",
    "4",
    "--clip-eps",
    "0.3",
    "--dual-clip",
    "2.5",
    "--entropy-coef",
    "0.01",
    "--entropy-ref-min",
    "0.2",
    "--entropy-turns",
    "2",
    "--entropy-schedule",
    "linear",
    "--entropy-decay-until",
    "0.5",
    "--entropy-target",
    "1.0",
    "0.4",
    "--entropy-target-lr",
    "0.1",
    "--kl-coef",
    "0.05",
    "--kl-schedule",
    "linear",
    "--kl-decay-until",
    "0.8",
    "--kl-estimator",
    "exact",
    "--temperature",
    "1.5",
    "--min-p",
    "0.05",
    "--eval-temperature",
    "0.7",
    "--init",
    "ck.pt",
    "--sft",
    "traces.jsonl",
    "--sft-steps",
    "50",
    "--model",
    "some/model",
    "--n-layer",
    "3",
    "--n-embd",
    "32",
    "--n-head",
    "2",
    "--n-positions",
    "256",
    "--tokenizer",
    "words",
    "--seed",
    "9",
    "--eval-every",
    "5",
    "--eval-episodes",
    "100",
    "--device",
    "cpu",
    "--threads",
    "2",
    "--overlap",
    "--resume",
    "--quiet",
]


DEFAULTS = {s: {o.name: o.default for o in OPTIONS if o.section == s} for s in SECTIONS}


def _resolved(nested: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every setting of ``nested`` (the defaults under it), the group size chosen as the old
    command line chose it when not given (8 for a group estimator, else 1)."""
    from gemgym.rl.advantages import GROUP_ESTIMATORS

    full = merge_nested(DEFAULTS, nested)
    if full["rl"]["group_size"] is None:
        full["rl"]["group_size"] = 8 if full["rl"]["estimator"] in GROUP_ESTIMATORS else 1
    return full


@pytest.mark.parametrize(
    "argv",
    [
        EVERY_OLD_FLAG,
        [ENV, "--updates", "3"],  # every default
        [ENV, "--time-budget", "60", "--estimator", "rloo"],  # a group estimator's group size
        [ENV, "--updates", "1", "--dual-clip", "0"],  # 0 turns the dual clip off
        [ENV, "--updates", "1", "--estimator", "reinforce", "--group-size", "2"],
    ],
)
def test_every_old_flag_parses_to_the_same_settings(argv: list[str]) -> None:
    old_args = _parse(_old_add_arguments, argv)
    new_args = _parse(add_arguments, argv)
    old = migrate_flat_config(_old_config(old_args))
    assert _resolved(values_from_args(new_args, OPTIONS)) == _resolved(old)
    read_shared(new_args, RESUME)  # --resume is the shared option (gemgym.cli.shared)
    assert (new_args.resume, new_args.quiet) == (old_args.resume, old_args.quiet)
    if argv is not EVERY_OLD_FLAG:  # (that one sets flags that exclude each other)
        new = config_from_args(new_args)
        assert new == config_from_dict(old) or (
            new.rl.group_size is None and new.rl.group_size_for_estimator == old["rl"]["group_size"]
        )


def test_every_old_flag_is_still_declared() -> None:
    old = argparse.ArgumentParser()
    _old_add_arguments(old)
    new = argparse.ArgumentParser()
    add_arguments(new)
    old_flags = {s for a in old._actions for s in a.option_strings}
    new_flags = {s for a in new._actions for s in a.option_strings}
    old_flags -= {"-h", "--help"}
    assert len(old_flags) == 46  # and the positional env id
    assert old_flags <= set(EVERY_OLD_FLAG)  # the first case above sets every one of them
    assert old_flags <= new_flags


def test_the_flags_are_made_from_the_config_fields() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    by_dest = {a.dest: a for a in parser._actions if a.help != argparse.SUPPRESS}
    # every field of every section has one argument (the env id: the positional one)
    assert [o.path for o in OPTIONS] == [f"{s}.{n}" for s, names in SECTIONS.items() for n in names]
    assert {o.path for o in OPTIONS} <= set(by_dest)
    positional = [o.path for o in OPTIONS if not by_dest[o.path].option_strings]
    assert positional == ["run.env_id"]
    # no two options share a spelling, and each flag is its section's prefix and its name,
    # but for the four that keep the short names users typed
    spellings = [s for a in parser._actions for s in a.option_strings]
    assert len(spellings) == len(set(spellings))
    own = {o.path: o.flag for o in OPTIONS if o.meta.flag}
    assert own == {
        "run.env_kwargs": "--env-kwarg",  # the shared flag (--env-kwargs is the same option)
        "run.out_dir": "--out",
        "run.time_budget_s": "--time-budget",
        "sft.path": "--sft",
        "sft.init_checkpoint": "--init",
    }
    for o in OPTIONS:
        if o.path not in own and o.path != "run.env_id":
            assert o.flag == "--" + (o.prefix + o.name).replace("_", "-")
            assert by_dest[o.path].option_strings[0] == o.flag
    # a flag not given leaves the default (of the field, never of the parser)
    assert values_from_args(_parse(add_arguments, [ENV]), OPTIONS) == {"run": {"env_id": ENV}}
    assert config_from_args(_parse(add_arguments, [ENV, "--updates", "1"])) == config_from_dict(
        {"run": {"env_id": ENV, "updates": 1}}
    )
    # the fields the hand-written flags left out have flags too
    args = _parse(
        add_arguments,
        [
            ENV,
            "--updates",
            "1",
            "--max-new-tokens",
            "12",
            "--sft-lr",
            "0.01",
            "--no-eval-greedy",
            "--eval-every-episodes",
            "32",
            "--checkpoint-every",
            "0",
            "--max-grad-norm",
            "0.5",
            "--no-overlap",
        ],
    )
    cfg = config_from_args(args)
    assert (cfg.sampling.max_new_tokens, cfg.sft.lr, cfg.eval.greedy) == (12, 0.01, False)
    assert (cfg.eval.every_episodes, cfg.checkpoint.every, cfg.optim.max_grad_norm) == (32, 0, 0.5)
    assert cfg.run.overlap is False and cfg.to_dict()["sft"]["lr"] == 0.01


def test_the_two_evaluation_sizes_are_no_longer_crossed() -> None:
    """``--eval-episodes`` (the final evaluation) sets ``eval.episodes``,
    ``--eval-every-episodes`` (each periodic one) ``eval.every_episodes``."""
    args = _parse(
        add_arguments, [ENV, "--updates", "1", "--eval-episodes", "7", "--eval-every-episodes", "3"]
    )
    cfg = config_from_args(args)
    assert (cfg.eval.episodes, cfg.eval.every_episodes) == (7, 3)
    assert TrainConfig.from_flags(updates=1, eval_episodes=7, eval_every_episodes=3) == cfg


def test_an_old_spelling_still_works_and_warns() -> None:
    for old, value in (("--final-eval-greedy", True), ("--no-final-eval-greedy", False)):
        with pytest.warns(DeprecatedOptionWarning, match=f"{old} is deprecated: use --"):
            args = _parse(add_arguments, [ENV, "--updates", "1", old])
        assert config_from_args(args).eval.greedy is value


def test_bad_choices_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(add_arguments, [ENV, "--estimator", "gae"])  # no critic in this trainer
    assert "invalid choice: 'gae'" in capsys.readouterr().err
    assert (
        json.loads('{"a": 1}')
        == _parse(add_arguments, [ENV, "--env-kwargs", '{"a": 1}']).__dict__["run.env_kwargs"]
    )


def test_errors_name_the_flags_on_the_command_line_and_the_parameters_in_python() -> None:
    with pytest.raises(ConfigError, match=r"^rl\.gamma must be in \[0, 1\], got 1\.5$"):
        TrainConfig.from_flags(updates=1, gamma=1.5)
    with pytest.raises(ConfigError, match=r"^--gamma must be in \[0, 1\], got 1\.5$"):
        config_from_args(_parse(add_arguments, [ENV, "--updates", "1", "--gamma", "1.5"]))
    with pytest.raises(ConfigError, match="give --entropy-ref-min or --entropy-turns"):
        argv = [ENV, "--updates", "1", "--entropy-coef", "0.1", "--entropy-target", "1", "0.5"]
        config_from_args(_parse(add_arguments, argv))
    with pytest.raises(ConfigError, match=r"--updates or --time-budget"):
        config_from_args(_parse(add_arguments, [ENV]))


def test_a_config_file_gives_the_settings_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        "[run]\n"
        'env_id = "game:GuessTheNumber-v0-hard"\n'
        "updates = 5\n"
        "[run.env_kwargs]\n"
        "partial_credit = false\n"
        "[rl]\n"
        'estimator = "grpo"\n'
        "gamma = 1\n"  # an integer is a float here
        "[entropy]\n"
        "coef = 0.1\n"
        "turns = 2\n"
        "target = [1.5, 0.25]\n"
        "[kl]\n"
        "coef = 0.05\n"
    )
    cfg = config_from_args(_parse(add_arguments, ["--config", str(path), "--kl-coef", "0.2"]))
    assert cfg.run.env_id == "game:GuessTheNumber-v0-hard" and cfg.run.updates == 5
    assert cfg.run.env_kwargs == {"partial_credit": False}
    assert (cfg.rl.estimator, cfg.rl.gamma, cfg.rl.group_size_for_estimator) == ("grpo", 1.0, 8)
    assert cfg.entropy.target == (1.5, 0.25)
    assert cfg.kl.coef == 0.2  # the flag over the file
    # the positional env id overrides the file's too
    cfg = config_from_args(_parse(add_arguments, [ENV, "--config", str(path)]))
    assert cfg.run.env_id == ENV
    # a file's mistakes are named
    for text, match in (
        ("[rl]\ngama = 0.5\n", r"\['rl\.gama'\] are not settings"),
        ("[rll]\n", r"unknown sections \['rll'\]"),
        ('[run]\nupdates = "5"\n', r"run\.updates \(--updates\) must be an integer, got '5'"),
        ("[run\n", "is not valid TOML"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=match):
            config_from_args(_parse(add_arguments, ["--config", str(path)]))
    with pytest.raises(ConfigError, match="does not exist"):
        config_from_args(_parse(add_arguments, ["--config", str(tmp_path / "none.toml")]))
