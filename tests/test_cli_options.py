"""The option groups ``gemgym run``, ``eval``, ``train`` and ``serve`` share: one declaration
(:mod:`gemgym.cli.shared`), so the same flags, defaults and help in every ``--help``; old
spellings still work and warn; library errors name parameters, the commands show the flags."""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

import pytest

from gemgym.cli import build_parser
from gemgym.cli.shared import ENV, ENV_KWARGS, EPISODES, MODEL_SERVER, OUTPUT, read_shared
from gemgym.options import DeprecatedOptionWarning, Option
from helpers.extras import skip_without
from helpers.net import free_port

COMMANDS = ("run", "eval", "train", "serve", "audit")
ENV_ID = "game:GuessTheNumber-v0-easy"

# which shared options each command takes (train keeps the seed in its run.seed, the output
# folder in its run.out_dir and the wrappers in its run.wrappers; eval plays --tasks x --n
# episodes, not --episodes; serve serves the env unwrapped)
TAKES: dict[str, tuple[Option, ...]] = {
    "run": (*ENV, *EPISODES, *MODEL_SERVER, *OUTPUT),
    "eval": (*ENV, *(o for o in EPISODES if o.name != "episodes"), *MODEL_SERVER, *OUTPUT),
    "train": (*ENV, *(o for o in EPISODES if o.name == "seed"), *OUTPUT),
    "serve": ENV_KWARGS,
    "audit": (*ENV_KWARGS, *(o for o in EPISODES if o.name == "seed")),
}


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


def _help_entries(command: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``--help`` of ``command`` as {first flag: its whole entry (spellings, help, default)}."""
    monkeypatch.setenv("COLUMNS", "100")
    text = _subparser(command).format_help()
    entries: dict[str, str] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if re.match(r"^  -", line):
            current = [line]
            entries[line.split()[0].rstrip(",")] = ""
        elif current is not None and re.match(r"^ {3,}\S", line):
            current.append(line)
        else:
            current = None
            continue
        entries[current[0].split()[0].rstrip(",")] = "\n".join(current)
    return entries


def test_the_shared_options_read_the_same_in_every_commands_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helps = {c: _help_entries(c, monkeypatch) for c in COMMANDS}
    for opt in (*ENV, *EPISODES, *MODEL_SERVER, *OUTPUT):
        takers = [c for c in COMMANDS if opt in TAKES[c]]
        assert takers, opt.flag
        entries = {c: helps[c].get(opt.flag) for c in takers}
        assert all(entries.values()), (opt.flag, entries)
        first = entries[takers[0]]
        assert all(e == first for e in entries.values()), (opt.flag, entries)
        assert opt.meta.help.split()[0] in first
    # the request timeout: one default everywhere
    assert "(default 120.0)" in helps["run"]["--timeout"] == helps["eval"]["--timeout"]
    # the output: one --out, whose help says what each command writes there, with train's
    # default (its config's) and run's default of 100 episodes
    from gemgym.cli.train import config_from_args

    out_dir = config_from_args(_parse("train", ENV_ID, "--updates", "1")).run.out_dir
    assert f"train: the run folder (default {out_dir})" in helps["train"]["--out"]
    assert (
        "run: a JSONL file" in helps["run"]["--out"]
        and "eval: the run folder" in helps["eval"]["--out"]
    )
    assert "(default 100)" in helps["run"]["--episodes"]
    # and the commands that do not take a group do not spell its flags another way
    for command in ("train", "serve"):
        assert "--max-steps" not in helps[command] and "--max-turns" not in helps[command]
        assert "--base-url" not in helps[command] and "--timeout" not in helps[command]
    for command in ("eval", "train", "serve"):
        assert "--episodes" not in helps[command]
    assert "--out" not in helps["serve"]
    # the wrappers: one --wrappers NAMES in run, eval and train (train's run.wrappers)
    assert "--wrappers NAMES" in helps["run"]["--wrappers"]
    assert "'grid'" in helps["train"]["--wrappers"] and "--wrappers" not in helps["serve"]


def test_the_shared_wrappers_reach_each_command() -> None:
    from gemgym.cli.train import config_from_args
    from gemgym.errors import ConfigError

    for command in ("run", "eval"):
        args = _parse(command, ENV_ID, "--wrappers", "grid")
        read_shared(args, ENV)
        assert args.wrappers == "grid"
        args = _parse(command, ENV_ID)
        read_shared(args, ENV)
        assert args.wrappers == ""
        args = _parse(command, ENV_ID, "--wrappers", "gird")
        with pytest.raises(ConfigError, match=r"^--wrappers: unknown wrapper 'gird'.*'grid'"):
            read_shared(args, ENV)
    config = config_from_args(_parse("train", ENV_ID, "--updates", "1", "--wrappers", "grid"))
    assert config.run.wrappers == "grid"
    with pytest.raises(ConfigError, match=r"^--wrappers: unknown wrapper 'gird'.*'grid'"):
        config_from_args(_parse("train", ENV_ID, "--updates", "1", "--wrappers", "gird"))


def test_the_shared_output_and_episode_count_reach_each_command() -> None:
    from gemgym.cli.train import config_from_args

    args = _parse("run", ENV_ID, "--episodes", "7", "--out", "t.jsonl")
    read_shared(args, ENV, EPISODES, MODEL_SERVER, OUTPUT)
    assert (args.episodes, args.out) == (7, "t.jsonl")
    args = _parse("run", ENV_ID)
    read_shared(args, ENV, EPISODES, MODEL_SERVER, OUTPUT)
    assert (args.episodes, args.out) == (100, None)
    args = _parse("eval", ENV_ID, "--out", "runs/a")
    read_shared(args, OUTPUT)
    assert args.out == "runs/a"
    with pytest.raises(SystemExit):  # eval's episodes are --tasks x --n
        _parse("eval", ENV_ID, "--episodes", "3")
    config = config_from_args(_parse("train", ENV_ID, "--updates", "1", "--out", "runs/b"))
    assert config.run.out_dir == "runs/b"


def test_resume_is_one_shared_option_and_an_error_with_nothing_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main
    from gemgym.cli.shared import RESUME

    for command, base in (("run", [ENV_ID]), ("eval", [ENV_ID]), ("train", [ENV_ID])):
        args = _parse(command, *base, "--resume")
        read_shared(args, RESUME)
        assert args.resume is True
        args = _parse(command, *base)
        read_shared(args, RESUME)
        assert args.resume is False
    # one help for the three (test_the_shared_options_read_the_same_in_every_commands_help);
    # run and eval refuse --resume when --out holds no run, as train does (tests/rl)
    missing = tmp_path / "none"
    assert main(["run", ENV_ID, "--agent", "oracle", "--episodes", "1", "--quiet",
                 "--out", f"{missing}.jsonl", "--resume"]) == 2  # fmt: skip
    assert "nothing to resume" in capsys.readouterr().err
    assert main(["eval", ENV_ID, "--agent", "oracle", "--tasks", "1", "--quiet",
                 "--out", str(missing), "--resume"]) == 2  # fmt: skip
    assert "nothing to resume" in capsys.readouterr().err
    assert not missing.exists()


def _parse(command: str, *argv: str) -> argparse.Namespace:
    return build_parser().parse_args([command, *argv])


@pytest.mark.parametrize(
    ("old", "new", "name", "value"),
    [("--max-steps", "--max-turns", "max_turns", 3), ("--batch-size", "--concurrency",
                                                      "concurrency", 2)],
)  # fmt: skip
@pytest.mark.parametrize("command", ["run", "eval"])
def test_old_spellings_still_work_and_warn(
    command: str, old: str, new: str, name: str, value: int
) -> None:
    with pytest.warns(DeprecatedOptionWarning, match=f"{old} is deprecated: use {new}"):
        args = _parse(command, ENV_ID, old, str(value))
    read_shared(args, ENV, EPISODES, MODEL_SERVER)
    assert getattr(args, name) == value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args = _parse(command, ENV_ID, new, str(value))
    read_shared(args, ENV, EPISODES, MODEL_SERVER)
    assert getattr(args, name) == value


@pytest.mark.parametrize("command", COMMANDS)
def test_env_kwargs_take_key_value_pairs_and_json_objects_alike(command: str) -> None:
    argv = ["--env-kwarg", "a=1", "--env-kwargs", '{"b": "x", "c": [1]}', "--env-kwarg", "d=y"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # two spellings of one option: no warning
        args = _parse(command, ENV_ID, *argv, *(["--updates", "1"] if command == "train" else []))
    expected = {"a": 1, "b": "x", "c": [1], "d": "y"}
    if command == "train":
        from gemgym.cli.train import config_from_args

        config = config_from_args(args)
        assert config.run.env_kwargs == expected
        assert config.run.seed == 0
        assert (
            config_from_args(_parse("train", ENV_ID, "--updates", "1", "--seed", "7")).run.seed == 7
        )
    else:
        read_shared(args, ENV)
        assert args.env_kwargs == expected


@pytest.mark.parametrize("bad", ["[1]", "novalue", "{not json"])
def test_a_bad_env_kwarg_is_refused_by_the_parser(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _parse("run", ENV_ID, "--env-kwarg", bad)
    assert "--env-kwarg" in capsys.readouterr().err


def test_shared_values_are_checked_where_they_are_declared() -> None:
    from gemgym.errors import ConfigError

    args = _parse("run", ENV_ID, "--max-turns", "0")
    with pytest.raises(ConfigError, match=r"^--max-turns must be >= 1, got 0$"):
        read_shared(args, ENV, EPISODES, MODEL_SERVER)
    args = _parse("run", ENV_ID, "--episodes", "0")
    with pytest.raises(ConfigError, match=r"^--episodes must be >= 1, got 0$"):
        read_shared(args, ENV, EPISODES, MODEL_SERVER)
    args = _parse("eval", ENV_ID, "--timeout", "0")
    with pytest.raises(ConfigError, match=r"^--timeout must be > 0, got 0\.0$"):
        read_shared(args, ENV, EPISODES, MODEL_SERVER)


def test_library_errors_name_parameters_and_eval_shows_its_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gemgym.cli import main
    from gemgym.errors import ConfigError
    from gemgym.evaluation.runner import EvalConfig

    with pytest.raises(ConfigError, match=r"^n must be at least 1, got 0$"):
        EvalConfig(n=0)
    with pytest.raises(ConfigError, match=r"^every k of ks must be in \[1, n=2\], got \[3\]$"):
        EvalConfig(n=2, ks=(3,))
    status = main(["eval", ENV_ID, "--agent", "random", "--n", "0", "--quiet"])
    assert status == 2
    assert "gemgym: error: n (--n) must be at least 1, got 0" in capsys.readouterr().err


@skip_without("openai")  # the chat agent's HTTP client
def test_the_chat_agents_errors_name_parameters_and_run_and_eval_show_their_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from gemgym.cli import main
    from gemgym.errors import ConfigError, ModelUnavailableError
    from gemgym.evaluation.agents import ChatAgent

    with pytest.raises(ConfigError) as missing:
        ChatAgent("m", "")
    assert "base_url" in str(missing.value) and "--" not in str(missing.value)
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    agent = ChatAgent("m", url)
    try:
        with pytest.raises(ModelUnavailableError) as down:
            asyncio.run(agent.probe())
    finally:
        asyncio.run(agent.aclose())
    assert "is base_url right?" in str(down.value) and "--" not in str(down.value)

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert main(["run", ENV_ID, "--agent", "openai", "--model", "m", "--quiet"]) == 2
    assert "needs base_url (--base-url)" in capsys.readouterr().err
    argv = ["--model", "m", "--base-url", url, "--quiet"]
    assert main(["run", ENV_ID, "--agent", "openai", *argv]) == 2
    assert "is base_url (--base-url) right?" in capsys.readouterr().err
    assert main(["eval", ENV_ID, *argv, "--out", str(tmp_path / "run")]) == 2
    assert "is base_url (--base-url) right?" in capsys.readouterr().err


def test_a_suites_error_names_the_parameter_and_eval_shows_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main
    from gemgym.errors import ConfigError
    from gemgym.evaluation.suites import resolve

    with pytest.raises(ConfigError) as info:
        resolve(["eval:HotpotQA+search"])[0].make()
    assert "as search_url" in str(info.value) and "--" not in str(info.value)
    argv = ["eval", "eval:HotpotQA+search", "--agent", "random", "--out", str(tmp_path / "run")]
    assert main([*argv, "--quiet"]) == 2
    assert "pass its URL as search_url (--search-url)" in capsys.readouterr().err


def test_the_trainers_messages_name_settings_and_train_shows_its_flags() -> None:
    """The trainer's errors, warnings and log lines name settings (``section.name``); ``gemgym
    train`` shows them as its flags (with ``--config``, as both)."""
    from gemgym.cli.train import _cli_text, _flags_in_warnings

    text = "give it more positions (policy.n_positions) or fewer tokens (policy.obs_max_tokens)"
    args = _parse("train", ENV_ID, "--updates", "1")
    assert _cli_text(text, args) == "give it more positions (--n-positions) or fewer tokens " \
        "(--obs-max-tokens)"  # fmt: skip
    with pytest.warns(UserWarning) as seen, _flags_in_warnings(args):
        warnings.warn(text, UserWarning, stacklevel=1)
    assert "(--n-positions)" in str(seen[0].message)
    args = _parse("train", ENV_ID, "--config", "c.toml")
    assert "(policy.n_positions (--n-positions))" in _cli_text(text, args)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "Fix the env or the policy (rl.keep_errors trains on failed episodes anyway)",
            "Fix the env or the policy (--keep-errors trains on failed episodes anyway)",
        ),
        (
            "an SFT warm start on recorded episodes (sft.path: a JSONL file from `gemgym run ... "
            "--out FILE.jsonl`) or a checkpoint's weights (sft.init_checkpoint).",
            "an SFT warm start on recorded episodes (--sft: a JSONL file from `gemgym run ... "
            "--out FILE.jsonl`) or a checkpoint's weights (--init).",
        ),
        (
            "RL gets what is left (sft.steps sets SFT's share)",
            "RL gets what is left (--sft-steps sets SFT's share)",
        ),
        (
            " (none: give a larger run.time_budget_s or fewer sft.steps)",
            " (none: give a larger --time-budget or fewer --sft-steps)",
        ),
    ],
)
def test_the_trainers_other_settings_show_as_train_flags(text: str, shown: str) -> None:
    """The settings the trainer's run messages name (failed episodes, the warm start, the
    time budget's split) are ``gemgym train``'s flags there."""
    from gemgym.cli.train import _cli_error, _cli_text
    from gemgym.errors import GemGymError

    assert "--keep-errors" not in text and "--sft" not in text and "--time-budget" not in text
    args = _parse("train", ENV_ID, "--updates", "1")
    assert _cli_text(text, args) == shown
    error = _cli_error(GemGymError(text), args)
    assert type(error) is GemGymError and str(error) == shown


def test_trainer_run_parameters_show_as_train_flags_in_its_errors() -> None:
    from gemgym.cli.train import _cli_error
    from gemgym.errors import ConfigError

    args = _parse("train", ENV_ID, "--updates", "1")
    text = (
        "nothing to resume: out/checkpoint.pt does not exist. Give the run.out_dir of the run "
        "to continue, or drop resume to start a new run"
    )
    error = _cli_error(ConfigError(text), args)
    assert isinstance(error, ConfigError)
    assert str(error) == (
        "nothing to resume: out/checkpoint.pt does not exist. Give the --out of the run "
        "to continue, or drop resume (--resume) to start a new run"
    )
