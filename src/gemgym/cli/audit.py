"""``gemgym audit ENV...``: play generic exploit policies against envs; fail if one pays.

Examples::

    gemgym audit game:GuessTheNumber-v0-easy code:HumanEval math:GSM8K+python
    gemgym audit 'game:*-easy' --episodes 16 --policies empty,shotgun --json audit.json
    gemgym audit terminal:hello-file --max-turns 4 --out runs/audit

Each env plays the random agent, the expert (when it has one) and every exploit that applies
(``gemgym.audit.policies``), on the same seeds and items, with the episode engine. Exit status:
1 when an exploit beats random (the flag rule is in ``gemgym.audit.stats``) and the env's card
does not explain it, 0 otherwise, 2 for bad input. See docs/audit.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gemgym._console import stdout_console
from gemgym.cli.shared import ENV_KWARGS, EPISODES, add_shared, read_shared
from gemgym.errors import ConfigError

GROUPS = (ENV_KWARGS, tuple(o for o in EPISODES if o.name == "seed"))
"""The shared options ``gemgym audit`` takes (:mod:`gemgym.cli.shared`): ``--env-kwarg`` and
``--seed``, as ``run``, ``eval`` and ``train`` read them."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym audit``."""
    p.add_argument(
        "env_ids",
        nargs="+",
        metavar="ENV_ID",
        help="env ids, globs (game:*-easy), suites (games) or ID+python",
    )
    p.add_argument("--episodes", type=int, default=8, help="episodes per policy (default 8)")
    p.add_argument(
        "--policies",
        default=None,
        metavar="A,B",
        help="exploit policies to run, comma-separated (default: all; see docs/audit.md)",
    )
    p.add_argument(
        "--max-turns", type=int, default=30, help="cut episodes after N turns (default 30)"
    )
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight (default 4)")
    p.add_argument(
        "--alpha", type=float, default=0.01, help="significance of the flag test (default 0.01)"
    )
    p.add_argument(
        "--margin", type=float, default=0.01, help="least mean gain over random (default 0.01)"
    )
    p.add_argument("--search-url", help="search server for +search envs")
    p.add_argument("--json", metavar="PATH", help="write the full report as JSON")
    p.add_argument("--out", metavar="DIR", help="write report.md and report.json into DIR")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_shared(p, *GROUPS)


def run(args: argparse.Namespace) -> int:
    """Run the audit, print the table, write the reports; 1 when an exploit pays."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from gemgym.audit import audit
    from gemgym.audit.stats import min_episodes

    read_shared(args, *GROUPS)
    policies = None
    if args.policies is not None:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        if not policies:
            raise ConfigError("--policies takes a comma-separated list of exploit names")
    console = Console(stderr=True)
    if args.episodes < min_episodes(args.alpha) and args.episodes >= 2:
        console.print(
            f"warning: with {args.episodes} episodes no exploit can reach p < {args.alpha}; "
            f"use --episodes {min_episodes(args.alpha)} or more",
            markup=False,
        )
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("auditing", total=None)

        def on_progress(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=label)

        report = audit(
            args.env_ids,
            episodes=args.episodes,
            seed=args.seed,
            policies=policies,
            env_kwargs=dict(args.env_kwargs),
            max_turns=args.max_turns,
            concurrency=args.concurrency,
            alpha=args.alpha,
            margin=args.margin,
            search_url=args.search_url,
            progress=on_progress,
        )
    stdout_console().print(report.table())
    if args.json:
        report.write_json(args.json)
        console.print(f"wrote {args.json}", markup=False)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text("# gemgym audit\n\n" + report.to_markdown())
        report.write_json(out / "report.json")
        console.print(f"wrote {out / 'report.md'} and {out / 'report.json'}", markup=False)
    for env, arm in report.flagged:
        console.print(
            f"FLAG: {arm.policy} beats random on {env}: mean {arm.mean_return:.3g} vs "
            f"{arm.mean_return - (arm.delta or 0.0):.3g} (p = {arm.p_value:.2g})",
            markup=False,
        )
    for e in report.envs:
        for arm in [e.random, *e.exploits]:
            if arm.errors:
                console.print(
                    f"note: {arm.errors} {arm.policy} episode(s) failed on {e.env} "
                    f"({arm.first_error})",
                    markup=False,
                    soft_wrap=True,
                )
    return report.exit_status
