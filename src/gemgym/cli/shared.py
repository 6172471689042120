"""The option groups that ``gemgym run``, ``eval``, ``train`` and ``serve`` share, declared once.

Each group is a section of :mod:`gemgym.options` (a dataclass of :func:`~gemgym.options.option`
fields), so that every command that takes it shows the same flags, with the same defaults and
the same help, and reads them the same way:

* :class:`EnvOptions` (``run``, ``eval``, ``train``; ``serve`` takes ``--env-kwarg``):
  ``--env-kwarg KEY=VALUE``, repeatable, or a JSON object of several (``--env-kwargs`` is the
  same option); ``--wrappers NAMES``, wrappers around every env by name
  (:mod:`gemgym.wrappers.factory`), so that a policy trained with ``gemgym train --wrappers``
  is run and evaluated on the env it was trained on;
* :class:`EpisodeOptions` (``run``, ``eval``; ``train`` takes ``--seed``): ``--episodes``
  (``run``; ``eval`` plays ``--tasks`` tasks of ``--n`` samples instead), ``--seed``,
  ``--max-turns`` (formerly ``--max-steps``), ``--concurrency`` (formerly ``--batch-size``);
* :class:`ModelServerOptions` (``run``, ``eval``): the OpenAI-compatible chat server the
  ``openai`` agent talks to (one client: :class:`gemgym.evaluation.agents.ChatAgent`);
* :class:`OutputOptions` (``run``, ``eval``, ``train``): ``--out``, where the command writes
  its results (``run``: a JSONL file of the episodes; ``eval`` and ``train``: a run folder),
  and ``--resume``, which continues the run there (an error when there is none).

A command that keeps a setting in its own config (``train``: ``run.seed``, ``run.env_kwargs``,
``run.wrappers``, ``run.out_dir``) takes the shared flag for it with
:func:`gemgym.options.rebase`: one flag, one meaning.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gemgym.errors import ConfigError
from gemgym.options import (
    Option,
    add_option_groups,
    build_section,
    flags_in_message,
    option,
    section_options,
    values_from_args,
)

__all__ = [
    "AGENT_PARAMETERS",
    "ENV",
    "ENV_KWARGS",
    "EPISODES",
    "MODEL_SERVER",
    "OUTPUT",
    "RESUME",
    "TITLES",
    "EnvOptions",
    "EpisodeOptions",
    "ModelServerOptions",
    "OutputOptions",
    "add_shared",
    "agent_message",
    "chat_agent",
    "cli_message",
    "names_as_flags",
    "parse_env_kwargs",
    "read_shared",
]


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """``KEY=VALUE`` (VALUE read as JSON when it can be) or a JSON object of several keywords."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(f"{text!r} is not JSON: {e}") from None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(
                f'{text!r}: a JSON value must be a JSON object, e.g. \'{{"dataset": "sample"}}\''
            )
        return value
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE or a JSON object, got {text!r}")
    try:
        return {key: json.loads(raw)}
    except json.JSONDecodeError:
        return {key: raw}


class _Checked:
    section: ClassVar[str]

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the parameter (``section.name``)."""

    def _check(self, name: str, ok: bool, requirement: str) -> None:
        if not ok:
            raise ConfigError(
                f"{self.section}.{name} must be {requirement}, got {getattr(self, name)!r}"
            )


@dataclass
class EnvOptions(_Checked):
    """How the env is made."""

    section: ClassVar[str] = "env"

    env_kwargs: dict[str, Any] = option(  # noqa: RUF009 - a dataclasses.field
        default_factory=dict,
        help="a keyword argument for the env: KEY=VALUE (VALUE read as JSON when it can be) "
        "or a JSON object of several; repeatable",
        flag="--env-kwarg",
        aliases=("--env-kwargs",),
        parse=parse_env_kwargs,
        repeat=True,
        metavar="KEY=VALUE",
    )
    wrappers: str = option(
        "",
        help="wrappers around the env, by name, comma-separated (gemgym.wrappers.factory, e.g. "
        "'grid': the board alone as the observation)",
        metavar="NAMES",
    )

    def validate(self) -> None:
        self._check("wrappers", isinstance(self.wrappers, str), "a string")
        if self.wrappers:
            from gemgym.wrappers.factory import get_wrapper_fns

            try:
                get_wrapper_fns(self.wrappers)
            except ConfigError as e:
                raise ConfigError(f"{self.section}.wrappers: {e}") from None


@dataclass
class EpisodeOptions(_Checked):
    """Which episodes are played, how long, how many at once."""

    section: ClassVar[str] = "episodes"

    episodes: int = option(
        100,
        help="how many episodes to play",
        metavar="N",
    )
    seed: int = option(
        0,
        help="base seed: episode (eval: task) k is reset with seed+k; sampling (train: also "
        "the model's initialisation) is seeded from it",
    )
    max_turns: int | None = option(
        None,
        help="cut each episode after N turns (default: the env's own limit)",
        deprecated=("--max-steps",),
        metavar="N",
    )
    concurrency: int | None = option(
        None,
        help="episodes in flight (default 16; gemgym run's random and oracle agents: 1)",
        deprecated=("--batch-size",),
        metavar="N",
    )

    def validate(self) -> None:
        self._check("episodes", self.episodes >= 1, ">= 1")
        self._check("max_turns", self.max_turns is None or self.max_turns >= 1, ">= 1")
        self._check("concurrency", self.concurrency is None or self.concurrency >= 1, ">= 1")


@dataclass
class ModelServerOptions(_Checked):
    """The OpenAI-compatible chat server of the ``openai`` agent."""

    section: ClassVar[str] = "model"

    model: str | None = option(
        None,
        help="the model: a name the server serves (eval's transformers agent: a local path "
        "or Hub id)",
    )
    base_url: str | None = option(
        None, help="the server's URL, e.g. http://localhost:8000/v1 (default $OPENAI_BASE_URL)"
    )
    api_key_env: str = option("OPENAI_API_KEY", help="environment variable with the API key")
    timeout: float = option(120.0, help="seconds per request", metavar="S")
    max_retries: int = option(5, help="retries of a failed request", metavar="N")
    retry_backoff: float = option(
        1.0, help="the first retry waits up to S seconds (doubling)", metavar="S"
    )
    temperature: float | None = option(None, help="sampling temperature (default: the server's)")
    max_tokens: int | None = option(None, help="tokens per reply (default: the server's)")
    system_prompt: str | None = option(None, help="a system message before the first observation")
    probe: bool = option(
        True, help="check the model server before the run (one request to its /models)"
    )

    def validate(self) -> None:
        self._check("timeout", self.timeout > 0, "> 0")
        self._check("max_retries", self.max_retries >= 0, ">= 0")
        self._check("retry_backoff", self.retry_backoff >= 0, ">= 0")


@dataclass
class OutputOptions(_Checked):
    """Where the command writes its results."""

    section: ClassVar[str] = "output"

    out: str | None = option(
        None,
        help="where the results go: run: a JSONL file, one line per episode, each written as it "
        "ends (default: none); eval: the run folder (default runs/eval-YYYYmmdd-HHMMSS); "
        "train: the run folder (default runs/train)",
        metavar="PATH",
        help_names_default=True,
    )
    resume: bool = option(
        False,
        help="continue the run in --out (an error when it holds none): run: play the episodes "
        "the file lacks and those that failed; eval: the tasks the folder lacks, and errors up "
        "to --max-attempts; train: from OUT/checkpoint.pt. The env, its --env-kwarg and "
        "--wrappers, and --seed must be the run's",
    )


ENV: tuple[Option, ...] = tuple(section_options("env", EnvOptions))
ENV_KWARGS: tuple[Option, ...] = tuple(o for o in ENV if o.name == "env_kwargs")
"""The part of :data:`ENV` that ``serve`` takes (it serves the env unwrapped)."""
EPISODES: tuple[Option, ...] = tuple(section_options("episodes", EpisodeOptions))
MODEL_SERVER: tuple[Option, ...] = tuple(section_options("model", ModelServerOptions))
OUTPUT: tuple[Option, ...] = tuple(section_options("output", OutputOptions))
RESUME: tuple[Option, ...] = tuple(o for o in OUTPUT if o.name == "resume")
"""The part of :data:`OUTPUT` that ``train`` takes as it is (its ``--out`` is ``run.out_dir``)."""

TITLES = {
    "env": "env (shared by run, eval, train; serve and audit take --env-kwarg)",
    "episodes": "episodes (shared by run, eval; eval plays --tasks x --n, not --episodes; train "
    "and audit take --seed)",
    "model": "model server: any OpenAI-compatible chat server (shared by run, eval)",
    "output": "output (shared by run, eval, train)",
}

_SECTIONS: dict[str, type[Any]] = {
    "env": EnvOptions,
    "episodes": EpisodeOptions,
    "model": ModelServerOptions,
    "output": OutputOptions,
}


def add_shared(p: argparse.ArgumentParser, *groups: Sequence[Option]) -> None:
    """Add the shared ``groups`` (:data:`ENV`, :data:`EPISODES`, :data:`MODEL_SERVER`,
    :data:`OUTPUT`, or some of a group's options) to ``p``."""
    add_option_groups(p, [opt for g in groups for opt in g], titles=TITLES)


def read_shared(args: argparse.Namespace, *groups: Sequence[Option]) -> None:
    """Set ``args.<name>`` for every option of ``groups``: the value given or the default,
    checked by its section (a :class:`ConfigError` naming the flag)."""
    options = [opt for g in groups for opt in g]
    given = values_from_args(args, options)
    for section in dict.fromkeys(opt.section for opt in options):
        try:
            values = build_section(_SECTIONS[section], section, given.get(section, {}))
        except ConfigError as e:
            raise ConfigError(flags_in_message(str(e), options)) from None
        for opt in options:
            if opt.section == section:
                setattr(args, opt.name, getattr(values, opt.name))


def cli_message(
    message: str, options: Sequence[Option], more: Mapping[str, str] | None = None
) -> str:
    """A library error's message with the parameters it names (``max_turns``) shown with
    their flags (``max_turns (--max-turns)``): the names of ``options`` and of ``more``
    (``{"tokenizer": "--tokenizer"}``). Each is shown with its flag once, where the message
    names it last (a library message ends with what to change), so that a word of text the
    message quotes (a server's answer) is left as it is."""
    flags = {opt.name: opt.flag for opt in options if not opt.meta.positional}
    flags.update(more or {})
    return names_as_flags(message, flags, last=True)


def names_as_flags(message: str, flags: Mapping[str, str], *, last: bool = False) -> str:
    """``message`` with each parameter name of ``flags`` it holds (a whole word) shown with its
    flag: ``n must be ...`` -> ``n (--n) must be ...``; with ``last``, only the last place it
    names each."""
    if not flags:
        return message
    names = sorted(flags, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    found = list(pattern.finditer(message))
    if last:
        found = list({m.group(1): m for m in found}.values())
        found.sort(key=lambda m: m.start())
    out, at = [], 0
    for m in found:
        out += [message[at : m.end()], f" ({flags[m.group(1)]})"]
        at = m.end()
    return "".join([*out, message[at:]])


AGENT_PARAMETERS = ("base_url", "timeout", "max_tokens", "concurrency")
"""The parameters the messages of the model server's agent name (besides ``api_key``), whose
flags the commands show with them (not ``model``: the word means the model too, as in "model
requests")."""


def agent_message(message: str, more: Mapping[str, str] | None = None) -> str:
    """A message of the model server's agent (:class:`~gemgym.evaluation.agents.ChatAgent`:
    an error, a reply's warning, why a run stopped) with the parameters it names shown with
    their flags (``api_key``: the variable ``--api-key-env`` names)."""
    options = [o for o in (*MODEL_SERVER, *EPISODES) if o.name in AGENT_PARAMETERS]
    key = next(o for o in MODEL_SERVER if o.name == "api_key_env")
    extra = {"api_key": f"read from the variable {key.flag} names", **(more or {})}
    return cli_message(message, options, extra)


def chat_agent(args: argparse.Namespace, **extra: Any) -> Any:
    """The ``openai`` agent of ``gemgym run`` and ``gemgym eval``: one
    :class:`~gemgym.evaluation.agents.ChatAgent` built from the model server group (and
    ``--seed``); ``extra`` are the command's own settings (eval: ``top_p``, ``chat_options``,
    ``history``). Its errors name parameters; the caller shows them with its flags."""
    import os

    from gemgym.evaluation.agents import ChatAgent

    if not args.model:
        raise ConfigError("--agent openai needs --model (and usually --base-url)")
    return ChatAgent(  # it names base_url when there is none
        args.model,
        args.base_url or os.environ.get("OPENAI_BASE_URL") or "",
        api_key=os.environ.get(args.api_key_env) or "EMPTY",
        system_prompt=args.system_prompt,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        seed=args.seed,
        timeout=args.timeout,
        max_retries=args.max_retries,
        backoff=args.retry_backoff,
        **extra,
    )
