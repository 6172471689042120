"""``gemgym run ID --agent random|oracle|openai``: play episodes, show a summary, save traces.

Example::

    gemgym run game:GuessTheNumber-v0-hard --agent oracle --episodes 200 --seed 0 --out traces.jsonl
    gemgym run game:Wordle-v0-easy --agent openai --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from gemgym.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym run``."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-hard")
    p.add_argument("--agent", choices=["random", "oracle", "openai"], default="oracle")
    p.add_argument("--episodes", type=int, default=100, help="number of episodes (default 100)")
    p.add_argument("--seed", type=int, default=0, help="episode k uses seed+k (default 0)")
    p.add_argument("--out", help="write the episodes to this JSONL file")
    p.add_argument("--batch-size", type=int, default=None, help="episodes played at once")
    p.add_argument("--max-steps", type=int, default=None, help="cut episodes after N steps")
    p.add_argument(
        "--env-kwarg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword for the env (VALUE parsed as JSON when it can be); repeatable",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    g = p.add_argument_group("openai agent")
    g.add_argument("--model", help="model name served by the server")
    g.add_argument("--base-url", help="server URL, e.g. http://localhost:8000/v1")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var with the API key")
    g.add_argument("--temperature", type=float, default=0.7)
    g.add_argument("--max-tokens", type=int, default=1024)
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    g.add_argument("--max-retries", type=int, default=2, help="retries of a failed request")
    g.add_argument("--system-prompt", default=None)


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


def run(args: argparse.Namespace) -> int:
    """Run the agent and print the summary table."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from rich.table import Table

    from gemgym.agents import make_agent
    from gemgym.experience import Episode, rollout, summarize, write_jsonl
    from gemgym.registry import make

    if args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}")
    env_kwargs = parse_kv(args.env_kwarg)
    make(args.env_id, **env_kwargs).close()  # unknown ids and bad kwargs fail before anything
    if args.agent == "openai":
        if not args.model:
            raise ConfigError("--agent openai needs --model (and usually --base-url)")
        agent = make_agent(
            "openai",
            model=args.model,
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            timeout=args.timeout,
            max_retries=args.max_retries,
            system_prompt=args.system_prompt,
        )
        batch = args.batch_size or 16
    else:
        agent = make_agent(args.agent)
        batch = args.batch_size or 1
    console = Console(stderr=True)
    episodes: list[Episode] = []
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
            task = progress.add_task(f"{args.agent} on {args.env_id}", total=args.episodes)

            def played() -> Iterator[Episode]:
                for ep in rollout(
                    args.env_id,
                    agent,
                    episodes=args.episodes,
                    seed=args.seed,
                    batch_size=batch,
                    max_steps=args.max_steps,
                    **env_kwargs,
                ):
                    episodes.append(ep)
                    progress.advance(task)
                    yield ep

            if args.out:
                write_jsonl(played(), args.out)  # each episode is written as it ends
            else:
                for _ in played():
                    pass
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            close()
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
    Console(file=sys.stdout).print(table)
    if args.out:
        console.print(f"wrote {len(episodes)} episodes to {args.out}", markup=False)
    failed = [e for e in episodes if e.failed]
    if failed:  # scored as failures above; the command still says the run is not clean
        first = failed[0]
        console.print(
            f"error: {len(failed)} of {len(episodes)} episodes failed (counted as unsuccessful); "
            f"the first, episode {first.index}, at {first.error_stage}: {first.error}",
            markup=False,
            soft_wrap=True,
        )
        return 2
    return 0
