"""TrainConfig: typed sections that check their own values, the nested form and its TOML file,
the keyword-per-flag form, and the option generator's shared groups."""

from __future__ import annotations

import argparse
import copy
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gemgym.errors import ConfigError
from gemgym.options import (
    DeprecatedOptionWarning,
    add_option_groups,
    build_section,
    config_options,
    dumps_toml,
    option,
    section_options,
    values_from_args,
)
from gemgym.rl.trainer.config import (
    SECTIONS,
    EntropyConfig,
    KLConfig,
    PPOConfig,
    RLConfig,
    RunConfig,
    TrainConfig,
    config_from_dict,
)
from helpers.extras import needs_module


def test_the_sections_and_their_settings() -> None:
    assert list(SECTIONS) == [
        "run",
        "policy",
        "rl",
        "optim",
        "ppo",
        "entropy",
        "kl",
        "sampling",
        "sft",
        "eval",
        "checkpoint",
    ]
    options = config_options(TrainConfig)
    assert (
        len(options) == sum(len(names) for names in SECTIONS.values()) == 59
    )  # the flat config's 58 and run.wrappers
    for opt in options:  # every setting says what it does; None is only the default's
        assert opt.meta.help, opt.path
        assert not opt.optional or opt.default is None, opt.path


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: RunConfig(), r"give a number of updates or a time budget"),
        (lambda: RunConfig(updates=-1), r"^run\.updates must be >= 0, got -1$"),
        (lambda: RLConfig(gamma=1.5), r"^rl\.gamma must be in \[0, 1\], got 1\.5$"),
        (lambda: RLConfig(estimator="gae"), r"^rl\.estimator .* no critic"),
        (lambda: RLConfig(estimator="grpo", group_size=1), r"^rl\.group_size must be >= 2"),
        (lambda: RLConfig(episodes_per_update=6, group_size=4), r"multiple of rl\.group_size"),
        (lambda: PPOConfig(dual_clip=0.5), r"^ppo\.dual_clip must be > 1 \(or 0: off\)"),
        (lambda: KLConfig(estimator="exact"), r"^kl\.estimator 'exact' .* give kl\.coef > 0"),
        (lambda: EntropyConfig(turns=2), r"^entropy\.turns .* give entropy\.coef > 0 too$"),
    ],
)
def test_each_section_checks_its_values_when_made(make: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


def test_settings_across_sections_are_checked_by_the_config() -> None:
    with pytest.raises(ConfigError, match=r"ppo\.minibatches must not exceed rl\.episodes_"):
        TrainConfig(
            run=RunConfig(updates=1),
            rl=RLConfig(episodes_per_update=4),
            ppo=PPOConfig(minibatches=8),
        )
    with pytest.raises(ConfigError, match=r"sampling\.min_p is for the default model"):
        TrainConfig.from_flags(updates=1, model="gpt2", min_p=0.1)


def test_validate_checks_a_config_changed_after_it_was_made() -> None:
    cfg = TrainConfig(run=RunConfig(updates=1))
    cfg.validate()
    cfg.rl.gamma = 2.0
    with pytest.raises(ConfigError, match=r"rl\.gamma must be in \[0, 1\]"):
        cfg.validate()


def test_validation_changes_no_value() -> None:
    rl = RLConfig(estimator="grpo")
    assert rl.group_size is None and rl.group_size_for_estimator == 8
    assert RLConfig(estimator="rebn").group_size_for_estimator == 1
    ppo = PPOConfig(dual_clip=0.0)
    assert ppo.dual_clip == 0.0 and ppo.dual_clip_bound is None
    assert PPOConfig().dual_clip_bound == 3.0
    entropy = EntropyConfig(coef=0.1, turns=1, target=[2, 1])  # type: ignore[arg-type]
    before = copy.deepcopy(entropy)
    entropy.validate()
    assert entropy == before and entropy.target == [2, 1]
    assert entropy.target_range == (2.0, 1.0)


def test_the_nested_form_and_its_toml_file_read_back_to_the_same_config() -> None:
    cfg = TrainConfig.from_flags(
        env_id="game:Wordle-v0",
        env_kwargs={"word": 'a "quoted"\nline', "nested": {"k": [1, 2]}, "é": 1e-5},
        updates=3,
        lr=3e-4,
        kl_coef=0.01,
        kl_estimator="exact",
        entropy_coef=0.1,
        entropy_turns=2,
        entropy_target=(1.5, 0.25),
        estimator="grpo",
        dual_clip=0,
    )
    nested = cfg.to_dict()
    assert nested["optim"]["lr"] == 3e-4 and nested["kl"]["estimator"] == "exact"
    assert "group_size" not in nested["rl"]  # None: left out, it is the default
    assert config_from_dict(nested) == cfg
    text = dumps_toml(nested, header="a header\nof two lines")
    assert text.startswith("# a header\n# of two lines\n")
    assert config_from_dict(tomllib.loads(text)) == cfg
    assert config_from_dict({"run": {"updates": 3}}) == TrainConfig(run=RunConfig(updates=3))


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ({"run": {"updates": 1}, "rl": {"kl_coef": 0.1}}, r"\['rl\.kl_coef'\] are not settings"),
        ({"run": {"updates": 1}, "rl": 0.1}, "must be a table of its settings"),
        ({"run": {"updates": 1}, "nope": {}}, r"unknown sections \['nope'\]"),
        ({"run": {"updates": 1, "seed": 1.5}}, r"run\.seed must be an integer, got 1\.5"),
        ({"run": {"updates": 1}, "eval": {"greedy": 1}}, r"eval\.greedy must be true or false"),
        ({"run": {"updates": True}}, r"run\.updates must be an integer, got True"),
        ({"run": {"updates": 1}, "policy": {"model": None}}, None),  # None: the default
        ({"run": {"updates": 1}, "rl": {"gamma": None}}, r"rl\.gamma takes no null value"),
        ({"lr": 0.1, "kl_coeff": 0.1}, r"unknown sections"),  # not all flat names: not flat
    ],
)
def test_bad_nested_configs_name_the_problem(d: dict[str, Any], match: str | None) -> None:
    if match is None:
        config_from_dict(d)
        return
    with pytest.raises(ConfigError, match=match):
        config_from_dict(d)


def test_one_keyword_per_flag() -> None:
    cfg = TrainConfig.from_flags(
        updates=2, out="runs/x", time_budget=60, sft="t.jsonl", kl_coef=0.1, eval_greedy=False
    )
    assert (cfg.run.out_dir, cfg.run.time_budget_s, cfg.sft.path) == ("runs/x", 60.0, "t.jsonl")
    assert (cfg.kl.coef, cfg.eval.greedy) == (0.1, False)
    with pytest.raises(ConfigError, match="'out_dir' is not a gemgym train flag"):
        TrainConfig.from_flags(updates=1, out_dir="x")


@dataclass
class _SharedEnv:
    """A group several commands could share (as ``gemgym run`` and ``eval`` take)."""

    section: ClassVar[str] = "env"

    tool_kwarg: dict[str, Any] = option(  # noqa: RUF009 - a dataclasses.field
        default_factory=dict,
        help="a tool keyword argument (repeatable)",
        parse=lambda text: dict([text.split("=", 1)]),
        repeat=True,
        metavar="K=V",
    )
    max_turns: int | None = option(
        None, help="cut episodes after N turns", deprecated=("--max-steps",)
    )


def test_shared_groups_sit_beside_the_configs_sections() -> None:
    from gemgym.cli.train import OPTIONS, add_arguments, config_from_args

    shared = section_options("env", _SharedEnv)
    parser = argparse.ArgumentParser()
    add_arguments(parser, shared=shared)
    argv = ["--updates", "1", "--tool-kwarg", "a=1", "--tool-kwarg", "b=2", "--gamma", "0.5"]
    with pytest.warns(DeprecatedOptionWarning, match="--max-steps is deprecated: use --max-turns"):
        args = parser.parse_args([*argv, "--max-steps", "4"])
    env = build_section(_SharedEnv, "env", values_from_args(args, shared)["env"])
    assert env == _SharedEnv(tool_kwarg={"a": "1", "b": "2"}, max_turns=4)
    assert config_from_args(args).rl.gamma == 0.5  # the config's flags are unchanged
    assert {o.path for o in OPTIONS}.isdisjoint({o.path for o in shared})
    plain = argparse.ArgumentParser()
    add_option_groups(plain, shared)
    assert values_from_args(plain.parse_args([]), shared) == {}


def test_a_run_writes_its_settings_and_they_run_it_again(tmp_path: Path) -> None:
    needs_module("torch", "train")
    needs_module("transformers", "train")
    import warnings

    from gemgym.cli.train import add_arguments, config_from_args
    from gemgym.rl.trainer import Trainer

    cfg = TrainConfig.from_flags(
        out=str(tmp_path / "run"), updates=0, n_layer=1, n_embd=16, n_head=2, eval_episodes=0
    )
    cfg.policy.n_positions = 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Trainer(cfg).run()
    text = (tmp_path / "run" / "config.toml").read_text()
    assert text.startswith("# The settings of this gemgym train run")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    again = config_from_args(parser.parse_args(["--config", str(tmp_path / "run" / "config.toml")]))
    assert again == cfg
