"""``gemgym run ID --agent random|oracle|openai``: play episodes, show a summary, save traces.

The episodes are played by the episode engine; ``--agent openai`` is ``gemgym eval``'s chat
agent (:class:`gemgym.evaluation.agents.ChatAgent`): a probe of the server before the run,
retries with backoff, a failed request ends only its episode, a circuit breaker stops a run
against a server that keeps failing. ``--out`` gets each episode as it ends; ``--resume``
plays the episodes the file lacks and those that failed, and leaves one line per episode.
``--wrappers NAMES`` wraps every env by name (as ``gemgym train --wrappers`` trained on it).

Example::

    gemgym run game:GuessTheNumber-v0-hard --agent oracle --episodes 200 --seed 0 --out traces.jsonl
    gemgym run game:Sudoku-v0-easy --agent oracle --wrappers grid --episodes 200 --out grid.jsonl
    gemgym run game:Wordle-v0-easy --agent openai --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemgym._console import stdout_console
from gemgym.cli.shared import (
    ENV,
    EPISODES,
    MODEL_SERVER,
    OUTPUT,
    add_shared,
    agent_message,
    chat_agent,
    read_shared,
)
from gemgym.errors import ConfigError
from gemgym.options import Option

if TYPE_CHECKING:
    from gemgym.experience import Episode

GROUPS = (ENV, EPISODES, MODEL_SERVER, OUTPUT)
OPTIONS: tuple[Option, ...] = tuple(opt for g in GROUPS for opt in g)
"""The shared options ``gemgym run`` takes (errors that name their parameters show the flags)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym run``: its own, then the shared groups (:mod:`gemgym.cli.shared`)."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-hard")
    p.add_argument("--agent", choices=["random", "oracle", "openai"], default="oracle")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_shared(p, *GROUPS)


def parse_kv(items: list[str], flag: str = "--env-kwarg") -> dict[str, Any]:
    """``KEY=VALUE`` options as a dict (each VALUE parsed as JSON when it can be)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} takes KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _build_agent(args: argparse.Namespace) -> Any:
    """The agent: the engine policy of ``gemgym eval`` for ``openai``, else a built-in."""
    from gemgym.agents import make_agent

    if args.agent != "openai":
        return make_agent(args.agent)
    try:
        return chat_agent(args)
    except ConfigError as e:  # the library names its parameters; show the flags
        raise ConfigError(agent_message(str(e))) from None


def _check_oracle(
    env_id: str, env_kwargs: dict[str, Any], seed: int, wrappers: list[Any] | None = None
) -> None:
    """``--agent oracle`` needs an env with an expert: say so in one line, before the run."""
    from gemgym.registry import make

    env = make(env_id, wrappers=wrappers or None, **env_kwargs)
    try:
        env.reset(seed=seed)
        env.expert_action()
    except NotImplementedError as e:
        raise ConfigError(
            f"{env_id} has no expert ({e}), so --agent oracle cannot play it; use --agent "
            "random, or --agent openai with a model"
        ) from None
    except Exception:  # any other failure is the episodes' own, reported there
        pass
    finally:
        env.close()


def _previous(path: Path, env_id: str, seed: int, episodes: int) -> dict[int, Episode]:
    """The last record of each episode of an earlier run in ``path`` (``--resume``)."""
    from gemgym.episodes.outcomes import episode_seed
    from gemgym.experience import read_jsonl

    if not path.is_file():
        return {}
    # a torn last line (a kill mid-write) is dropped
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        path.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
    done: dict[int, Episode] = {}
    for ep in read_jsonl(path):
        if ep.env_id != env_id or ep.seed != episode_seed(seed, ep.index):
            raise ConfigError(
                f"{path} holds episodes of another run ({ep.env_id}, seed {ep.seed} for episode "
                f"{ep.index}); resume it with the same env and --seed, or choose another --out"
            )
        if ep.index < episodes:
            done[ep.index] = ep
    return done


def _check_same_env(
    path: Path | None,
    done: dict[int, Episode],
    env_id: str,
    wrappers: list[Any],
    env_kwargs: dict[str, Any],
) -> None:
    """Refuse to resume records played on another env than this command's: the first recorded
    episode's reset is replayed and must show the same observation (another ``--wrappers`` or
    ``--env-kwarg`` changes it, and mixing the two would mix observation formats in one file)."""
    from gemgym.registry import make

    first = done[min(done)]
    if not isinstance(first.initial_observation, str):
        return  # an image or structured observation: the env id and seeds were checked
    env = make(env_id, wrappers=wrappers or None, **env_kwargs)
    try:
        observation, _ = env.reset(seed=first.seed)
    finally:
        env.close()
    if observation != first.initial_observation:
        raise ConfigError(
            f"{path} holds episodes played with other --wrappers or --env-kwarg (episode "
            f"{first.index} began {json.dumps(first.initial_observation[:60])}, this env begins "
            f"{json.dumps(str(observation)[:60])}); resume it with the same ones, or choose "
            "another --out"
        )


def _compact(path: Path, episodes: dict[int, Episode]) -> None:
    """Rewrite ``path`` with one line per episode, in index order (atomically)."""
    import os

    from gemgym.experience import write_jsonl

    tmp = path.with_name(path.name + ".tmp")
    write_jsonl((episodes[k] for k in sorted(episodes)), tmp)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    """Run the agent and print the summary table."""
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from gemgym import experience
    from gemgym.episodes.engine import Engine, EnvSource, EpisodeSpec, run_sync
    from gemgym.episodes.outcomes import episode_seed
    from gemgym.errors import ModelUnavailableError
    from gemgym.registry import make
    from gemgym.wrappers.factory import get_wrapper_fns

    read_shared(args, *GROUPS)
    if args.resume and not args.out:
        raise ConfigError("--resume continues the run in --out: give --out FILE")
    if args.resume and not (Path(args.out).is_file() and Path(args.out).stat().st_size):
        raise ConfigError(
            f"nothing to resume: {args.out} holds no episodes; drop --resume to start a new run"
        )
    env_kwargs = dict(args.env_kwargs)
    wrappers = get_wrapper_fns(args.wrappers)  # each env gets its own instances
    # unknown ids, bad kwargs and wrappers that do not fit the env fail before anything
    make(args.env_id, wrappers=wrappers or None, **env_kwargs).close()
    out = Path(args.out) if args.out else None
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise ConfigError(f"--out {args.out} must be a file in an existing folder")
    if out is not None and out.is_file() and out.stat().st_size and not args.resume:
        raise ConfigError(
            f"{args.out} already holds episodes; pass --resume to finish that run, or choose "
            "another --out"
        )
    if args.agent == "oracle":
        _check_oracle(args.env_id, env_kwargs, args.seed, wrappers)
    agent = _build_agent(args)
    console = Console(stderr=True)
    if args.agent == "openai" and not args.probe:
        agent.probed = True  # the engine's open_run would probe it otherwise
    elif args.agent == "openai":
        try:
            warning = asyncio.run(agent.probe())
        except ModelUnavailableError as e:
            raise ModelUnavailableError(agent_message(str(e))) from None
        if warning:
            console.print(f"warning: {agent_message(warning)}", markup=False, soft_wrap=True)
    done = _previous(out, args.env_id, args.seed, args.episodes) if out and args.resume else {}
    if done:
        _check_same_env(out, done, args.env_id, wrappers, env_kwargs)
    todo = [k for k in range(args.episodes) if k not in done or done[k].failed]
    if done and not args.quiet:
        console.print(
            f"resuming {args.out}: {args.episodes - len(todo)} of {args.episodes} episodes done",
            markup=False,
        )
    batch = args.concurrency or (16 if args.agent == "openai" else 1)
    engine = Engine(
        experience.as_policy(agent),
        EnvSource.make(args.env_id, wrappers=wrappers or None, **env_kwargs),
        concurrency=max(1, min(batch, len(todo))),
        max_turns=args.max_turns,
        seed=args.seed if args.agent == "openai" else None,
    )
    specs = [EpisodeSpec(k, episode_seed(args.seed, k)) for k in todo]
    played: dict[int, Episode] = {}
    stopped: str | None = None
    interrupted = False
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=args.quiet,
            transient=True,
        ) as progress:
            task = progress.add_task(f"{args.agent} on {args.env_id}", total=len(todo))

            def episodes() -> Iterator[Episode]:
                for ep in run_sync(lambda: engine.play(specs)):
                    played[ep.index] = ep
                    progress.advance(task)
                    yield ep

            try:
                if out is not None and args.resume:
                    experience.write_jsonl(episodes(), out, append=True)
                elif out is not None:
                    experience.write_jsonl(episodes(), str(out))  # each written as it ends
                else:
                    for _ in episodes():
                        pass
            except ModelUnavailableError as e:  # the circuit breaker: the server is gone
                stopped = agent_message(str(e))
            except KeyboardInterrupt:  # Ctrl-C: keep what finished, say how to go on
                interrupted = True
    finally:
        engine.close()
        _close(agent)
    everything = {**done, **played}
    if out is not None and (args.resume or stopped or interrupted) and out.is_file():
        _compact(out, everything)
    _print_table(args, [everything[k] for k in sorted(everything)])
    if out is not None:
        console.print(f"wrote {len(played)} episodes to {out}", markup=False)
    if interrupted:
        console.print(
            f"interrupted after {len(everything)} of {args.episodes} episodes"
            + (f"; continue with --resume --out {args.out}" if args.out else ""),
            markup=False,
            soft_wrap=True,
        )
        return 130
    if stopped is not None:
        console.print(
            f"error: {stopped}; continue with --resume --out {args.out or 'FILE'} once the "
            "model server works",
            markup=False,
            soft_wrap=True,
        )
        return 2
    failed = [everything[k] for k in sorted(everything) if everything[k].failed]
    if failed:  # scored as failures above; the command still says the run is not clean
        first = failed[0]
        error = first.error or ""
        if first.error_stage == "model":  # the agent's message: its parameters as flags
            error = agent_message(error)
        console.print(
            f"error: {len(failed)} of {len(everything)} episodes failed (counted as "
            f"unsuccessful); the first, episode {first.index}, at {first.error_stage}: "
            f"{error}" + (f"; play them again with --resume --out {args.out}"
                          if args.out else ""),
            markup=False,
            soft_wrap=True,
        )  # fmt: skip
        return 2
    warned = [e for e in everything.values() if e.warnings]
    if warned:
        console.print(
            f"warning: {sum(len(e.warnings) for e in warned)} replies had no text; the first: "
            f"{agent_message(warned[0].warnings[0])}",
            markup=False,
            soft_wrap=True,
        )
    return 0


def _close(agent: Any) -> None:
    import asyncio

    aclose = getattr(agent, "aclose", None)
    if aclose is not None:
        asyncio.run(aclose())
        return
    close = getattr(agent, "close", None)
    if callable(close):
        close()


def _print_table(args: argparse.Namespace, episodes: list[Episode]) -> None:
    from rich.table import Table

    from gemgym.experience import summarize

    stats = summarize(episodes)
    table = Table(title=f"{args.agent} agent on {args.env_id}")
    for col in ("episodes", "errors", "mean return", "success rate", "mean turns"):
        table.add_column(col, justify="right")
    table.add_row(
        str(stats["episodes"]),
        str(stats["errors"]),
        f"{stats['mean_return']:.3f}",
        f"{stats['success_rate']:.1%}",
        f"{stats['mean_turns']:.2f}",
    )
    stdout_console().print(table)
