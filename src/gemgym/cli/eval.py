"""``gemgym eval``: evaluate an agent on suites of envs, robustly, with reports.

Examples::

    gemgym eval math --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1 --n 4 --k 1 --k 4
    gemgym eval games --agent oracle --tasks 20 --out runs/oracle
    gemgym eval 'game:*-easy' eval:AIME24+python --model m --base-url URL --resume --out runs/a
    gemgym eval rescore runs/a
    gemgym eval compare runs/a runs/b

A run folder (``--out``) holds ``episodes.jsonl``, ``run.json``, ``summary.json``, ``report.md``
and ``report.html``. Before the first episode one probe checks the model server: a server that
cannot be reached, refuses the key or does not serve the model ends the command in seconds.
Exit status: 0 when every episode was scored, 1 when some failed (they are listed in the
report; ``--resume`` plays them again), when the error rate exceeds ``--max-error-rate`` (no
score is printed), or when the circuit breaker stopped a run against a server that kept failing;
130 when interrupted (what finished is kept and summarised), 2 for bad input and a model server
the probe found unusable.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from gemgym._console import stdout_console
from gemgym.cli.run import parse_kv
from gemgym.cli.shared import (
    ENV,
    EPISODES,
    MODEL_SERVER,
    OUTPUT,
    add_shared,
    agent_message,
    chat_agent,
    names_as_flags,
    read_shared,
)
from gemgym.errors import ConfigError, ModelUnavailableError
from gemgym.options import Option

GROUPS = (ENV, tuple(o for o in EPISODES if o.name != "episodes"), MODEL_SERVER, OUTPUT)
"""The shared groups ``gemgym eval`` takes (the episodes it plays: ``--tasks`` x ``--n``)."""
OPTIONS: tuple[Option, ...] = tuple(opt for g in GROUPS for opt in g)
"""The shared options ``gemgym eval`` takes (errors that name their parameters show the flags)."""

# EvalConfig's parameters, as its errors name them, and this command's flags for them
EVAL_CONFIG_FLAGS = {
    "n": "--n",
    "ks": "--k",
    "tasks": "--tasks",
    "limit": "--limit",
    "concurrency": "--concurrency",
    "max_turns": "--max-turns",
}

EVAL_FLAGS = {"tokenizer": "--tokenizer", "search_url": "--search-url"}
"""Parameters of eval's own agents and envs that their messages name, and this command's flags
for them (besides the model server's, :func:`gemgym.cli.shared.agent_message`)."""


def _flags(message: str) -> str:
    """A library message with the parameters it names shown with this command's flags."""
    return agent_message(message, EVAL_FLAGS)


# the fields of run.json that decide which episodes a run plays (a resumed run must match)
RESUME_FIELDS = (
    "envs",
    "n",
    "tasks",
    "limit",
    "seed",
    "max_turns",
    "env_kwargs",
    "wrappers",
    "agent",
    "model",
)
RESUME_DEFAULTS = {"wrappers": ""}
"""The value of a field of :data:`RESUME_FIELDS` in a run.json written before the field was."""


RESCORE_HELP = """usage: gemgym eval rescore RUN

Re-grade every scored episode of the run folder RUN with today's envs and graders: each episode
is replayed (same reset seed, same item, same actions), its record rewritten in place, and
summary.json and the reports remade. Errors and env errors are skipped.
"""

COMPARE_HELP = """usage: gemgym eval compare RUN_A RUN_B

Per-env success of run B minus run A with a 95 % confidence interval; tasks played in both runs
are paired. A difference larger than its interval is printed in bold.
"""


class _Help(argparse.Action):
    """``--help``: the help of ``eval rescore`` / ``eval compare`` after those words."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        specs = getattr(namespace, "specs", None) or []
        if specs and specs[0] in ("rescore", "compare"):
            sys.stdout.write(RESCORE_HELP if specs[0] == "rescore" else COMPARE_HELP)
        else:
            parser.print_help()
        parser.exit(0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym eval``."""
    p._optionals.conflict_handler = "resolve"  # our --help replaces argparse's
    p.add_argument("-h", "--help", action=_Help, help="show this help message and exit")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "suites: math, math-notool, math-python, qa, qa-nosearch, qa-search, code, games, rg\n"
        "also: gemgym eval rescore RUN   |   gemgym eval compare RUN_A RUN_B"
    )
    p.add_argument(
        "specs",
        nargs="+",
        metavar="SPEC",
        help="suites, env ids or globs (game:*-easy), optionally +python / +search",
    )
    p.add_argument(
        "--agent",
        choices=["openai", "random", "oracle", "transformers", "vllm", "sglang"],
        default="openai",
        help="openai: any OpenAI-compatible chat server; transformers: a local model (--model "
        "PATH); vllm / sglang: token-id backends of a server (gemgym.llm)",
    )
    p.add_argument("--n", type=int, default=1, help="samples per task (default 1)")
    p.add_argument(
        "--k",
        type=int,
        action="append",
        default=None,
        help="pass@k to report; repeatable (default: 1 and --n)",
    )
    p.add_argument("--tasks", type=int, default=32, help="tasks of seeded envs (default 32)")
    p.add_argument("--limit", type=int, default=None, help="at most N tasks per env")
    p.add_argument("--search-url", help="search server for +search envs (gemgym serve-retriever)")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="play the envs on a Ray cluster: auto, HEAD:6379 (see `ray start`), or local; "
        "episodes on a lost node are played again elsewhere (docs/cluster.md)",
    )
    p.add_argument(
        "--ray-resource",
        action="append",
        default=[],
        metavar="NAME=AMOUNT",
        help="a Ray resource each env actor needs, e.g. sandbox=1 (only nodes started with "
        "--resources '{\"sandbox\": N}' host them); repeatable",
    )
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=0.05,
        help="refuse to print a score when more than this share of its episodes are errors "
        "(default 0.05); the exit status is 1 then",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        help="--resume plays an error again until it has been tried N times in all (default 3)",
    )
    g = p.add_argument_group("eval's agents (besides the model server's options below)")
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument(
        "--chat-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra request field, e.g. top_k=20 or chat_template_kwargs='{...}'; repeatable",
    )
    g.add_argument("--no-history", action="store_true", help="send only the latest observation")
    g.add_argument("--tokenizer", help="vllm / sglang: the model's tokenizer (default --model)")
    g.add_argument("--device", help="transformers: cpu, cuda, ... (default: CUDA if present)")
    add_shared(p, *GROUPS)


def run(args: argparse.Namespace) -> int:
    """Dispatch ``rescore``/``compare``, else run an evaluation."""
    if args.specs[0] == "rescore":
        return _rescore(args.specs[1:])
    if args.specs[0] == "compare":
        return _compare(args.specs[1:])
    return _evaluate(args)


def _rescore(rest: list[str]) -> int:
    from gemgym.evaluation.outputs import rescore
    from gemgym.evaluation.results import RunDir

    if len(rest) != 1:
        raise ConfigError("usage: gemgym eval rescore RUN")
    run_dir = RunDir.open_existing(rest[0])
    counts = rescore(run_dir)
    print(
        f"rescored {counts['rescored']} episodes ({counts['changed']} changed, "
        f"{counts['skipped']} errors skipped); wrote {run_dir.summary} and {run_dir.report_html}"
    )
    return 0


def _compare(rest: list[str]) -> int:
    from rich.table import Table

    from gemgym.evaluation.results import RunDir
    from gemgym.evaluation.scoring import compare_runs

    if len(rest) != 2:
        raise ConfigError("usage: gemgym eval compare RUN_A RUN_B")
    a, b = (RunDir.open_existing(p) for p in rest)
    rows = compare_runs(a.read_records(), b.read_records())
    table = Table(title=f"success: B ({rest[1]}) - A ({rest[0]}), 95% CI")
    for col in ("env", "A", "B", "B - A", "95% CI", "paired tasks"):
        table.add_column(col, justify="left" if col == "env" else "right")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    for r in rows:
        delta = "-" if r["delta"] is None else f"{r['delta']:+.1%}"
        if r["significant"]:
            delta = f"[bold]{delta}[/]"
        ci = "-" if r["ci"] is None else f"±{r['ci']:.1%}"
        table.add_row(r["env"], pct(r["a"]), pct(r["b"]), delta, ci, str(r["tasks"] or "-"))
    stdout_console().print(table)
    return 0


def _build_agent(args: argparse.Namespace) -> Any:
    try:
        return _make_agent(args)
    except ConfigError as e:  # the library names its parameters; show the flags
        raise ConfigError(_flags(str(e))) from None


def _make_agent(args: argparse.Namespace) -> Any:

    if args.agent in ("random", "oracle"):
        from gemgym.agents import make_agent

        return make_agent(args.agent)
    if not args.model:
        raise ConfigError(f"--agent {args.agent} needs --model")
    if args.agent in ("transformers", "vllm", "sglang"):
        return _backend_agent(args)
    return chat_agent(
        args,
        top_p=args.top_p,
        chat_options=parse_kv(args.chat_option, "--chat-option"),
        history=not args.no_history,
    )


def _backend_agent(args: argparse.Namespace) -> Any:
    """A :mod:`gemgym.llm` backend as the agent (the token-level layer)."""
    from gemgym.evaluation.agents import BackendAgent
    from gemgym.llm.backend import SamplingParams

    sampling = SamplingParams(
        temperature=1.0 if args.temperature is None else args.temperature,
        top_p=1.0 if args.top_p is None else args.top_p,
        max_tokens=args.max_tokens or 256,
    )
    tokenizer = None
    if args.agent == "transformers":
        from gemgym.llm.transformers_backend import TransformersBackend

        backend: Any = TransformersBackend(args.model, device=args.device)
    else:
        from gemgym.llm.servers import RetryPolicy, SGLangBackend, VLLMBackend

        if not args.base_url:
            raise ConfigError(f"--agent {args.agent} needs --base-url")
        try:
            from transformers import AutoTokenizer
        except ImportError as e:
            from gemgym.errors import missing_dependency

            raise missing_dependency("transformers", "llm") from e
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
        cls = VLLMBackend if args.agent == "vllm" else SGLangBackend
        backend = cls(
            args.base_url,
            model=args.model,
            timeout_s=args.timeout,
            retry=RetryPolicy(max_retries=args.max_retries, backoff_s=args.retry_backoff),
            max_concurrency=args.concurrency or 16,
            api_key=os.environ.get(args.api_key_env),
            extra=parse_kv(args.chat_option, "--chat-option"),
            tokenizer=tokenizer,
        )
    return BackendAgent(
        backend,
        sampling=sampling,
        tokenizer=tokenizer,
        system_prompt=args.system_prompt,
        seed=args.seed,
        history=not args.no_history,
    )


def _evaluate(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from gemgym import __version__
    from gemgym.evaluation.outputs import write_outputs
    from gemgym.evaluation.progress import EvalProgress
    from gemgym.evaluation.results import RunDir, record_key
    from gemgym.evaluation.runner import EvalConfig, Runner, pending, plan_tasks
    from gemgym.evaluation.suites import resolve

    read_shared(args, *GROUPS)
    if not 0.0 <= args.max_error_rate <= 1.0:
        raise ConfigError(f"--max-error-rate must be in [0, 1], got {args.max_error_rate}")
    if args.max_attempts < 1:
        raise ConfigError(f"--max-attempts must be at least 1, got {args.max_attempts}")
    try:
        config = EvalConfig(
            n=args.n,
            ks=tuple(sorted(set(args.k or [1, args.n]))),
            tasks=args.tasks,
            limit=args.limit,
            seed=args.seed,
            concurrency=args.concurrency or 16,
            max_turns=args.max_turns,
            search_url=args.search_url,
        )
    except ConfigError as e:  # the library names its parameters; show the flags
        raise ConfigError(names_as_flags(str(e), EVAL_CONFIG_FLAGS)) from None
    env_kwargs = dict(args.env_kwargs)
    out = args.out or time.strftime("runs/eval-%Y%m%d-%H%M%S")
    run_dir = RunDir(out)
    if run_dir.path.exists() and not run_dir.path.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder; choose a folder for the run")
    if args.resume and not run_dir.exists():
        raise ConfigError(
            f"nothing to resume: {out} holds no run; drop --resume to start a new run"
            + ("" if args.out else " (give the run's folder with --out)")
        )
    if run_dir.exists() and not args.resume:
        raise ConfigError(
            f"{out} already holds a run; pass --resume to finish it, or choose another --out"
        )
    envs = resolve(args.specs, env_kwargs, args.wrappers)
    agent = _build_agent(args)
    console = Console(stderr=True)
    if not args.probe:
        if hasattr(agent, "probed"):
            agent.probed = True  # the engine's open_run would probe it otherwise
    else:
        _probe(agent, console)
    _check_out(run_dir, out)
    run: dict[str, Any] = {
        "specs": list(args.specs),
        "envs": [e.name for e in envs],
        "agent": args.agent,
        "model": args.model if args.agent not in ("random", "oracle") else None,
        "base_url": args.base_url if args.agent not in ("random", "oracle") else None,
        "n": config.n,
        "ks": list(config.ks),
        "tasks": config.tasks,
        "limit": config.limit,
        "seed": config.seed,
        "max_turns": config.max_turns,
        "env_kwargs": env_kwargs,
        "wrappers": args.wrappers,
        "search_url": config.search_url,
        "ray": args.ray,
        "sampling": {
            "temperature": args.temperature,
            "top_p": args.top_p,
            "max_tokens": args.max_tokens,
        },
        "system_prompt": args.system_prompt,
        "chat_options": parse_kv(args.chat_option, "--chat-option"),
        "max_error_rate": args.max_error_rate,
        "gemgym_version": __version__,
    }
    done: list[dict[str, Any]] = []
    if args.resume:
        old = run_dir.read_config()
        diff = [
            f
            for f in RESUME_FIELDS
            if (f in old or f in RESUME_DEFAULTS) and old.get(f, RESUME_DEFAULTS.get(f)) != run[f]
        ]
        if diff:
            raise ConfigError(
                f"{out} was run with other settings ({', '.join(diff)}); resume it with the same "
                "ones, or choose another --out"
            )
        run_dir.compact()  # one line per episode, before more are appended
        done = run_dir.read_records()
    try:
        tasks, made = plan_tasks(envs, config)  # makes one env of each
    except ConfigError as e:
        raise ConfigError(_flags(str(e))) from None
    if args.agent == "oracle":
        _check_experts(made)
    todo = pending(tasks, done, args.max_attempts)
    capped = len(pending(tasks, done)) - len(todo)
    run["planned_episodes"] = len(tasks)
    run_dir.write_json(run_dir.config, run)
    run_dir.open_for_append()
    totals: dict[str, int] = {}
    for t in tasks:
        totals[t.env.name] = totals.get(t.env.name, 0) + 1
    if done and not args.quiet:
        console.print(f"resuming {out}: {len(tasks) - len(todo)} of {len(tasks)} episodes done")
    if capped:
        console.print(
            f"{capped} episodes failed {args.max_attempts} times and are not played again "
            "(raise --max-attempts to retry them)",
            markup=False,
        )
    progress = EvalProgress(totals, done, enabled=not args.quiet)
    attempts = {record_key(r): int(r.get("attempt") or 1) for r in done}
    runner = Runner(agent, config, run_dir, on_record=progress.update, envs=made, attempts=attempts)
    if args.ray:
        runner.ray = args.ray
        resources = parse_kv(args.ray_resource, "--ray-resource")
        runner.ray_options = {"resources": resources} if resources else {}

    async def go() -> None:
        try:
            with progress:
                await runner.run(todo)
        finally:
            aclose = getattr(agent, "aclose", None)  # the baselines hold nothing to release
            if aclose is not None:
                await aclose()

    status = "complete"
    stopped: str | None = None
    played_before = len(done)
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        asyncio.run(go())
    except KeyboardInterrupt:
        status = "interrupted"
    except ModelUnavailableError as e:  # the model server stopped answering: stop, keep all
        status, stopped = "stopped", _flags(str(e))
    finally:
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        runner.close()
        run_dir.close()
        run_dir.compact()
        played = progress.episodes
        run["last_session"] = {
            "episodes": played,
            "seconds": round(elapsed, 3),
            "cpu_seconds": round(cpu, 3),
            "episodes_per_s": round(played / elapsed, 1) if elapsed > 0 else None,
            "resumed_from": played_before,
        }
        result = write_outputs(run_dir, run, status=status)
    _print_summary(result, run_dir)
    _print_problems(result, console)
    if status == "interrupted":
        console.print(f"interrupted: finished episodes are in {run_dir.episodes}; "
                      f"continue with --resume --out {out}")  # fmt: skip
        return 130
    if stopped is not None:
        console.print(f"error: {stopped}; continue with --resume --out {out} once the model "
                      "server works", markup=False, soft_wrap=True)  # fmt: skip
        return 1
    overall = result["summary"]["overall"]
    if overall["refused"]:
        console.print(
            f"error: no score: {overall['errors']} of {overall['episodes']} episodes are "
            f"errors ({overall['error_rate']:.1%}, over --max-error-rate "
            f"{args.max_error_rate:.1%} overall or in an env); see {run_dir.report_md}, and "
            f"play them again with --resume --out {out}",
            markup=False,
            soft_wrap=True,
        )
        return 1
    return 1 if overall["errors"] else 0


def _check_out(run_dir: Any, out: str) -> None:
    """A run folder that can be written, else a one-line :class:`ConfigError`."""
    path = run_dir.path
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder; choose a folder for the run")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".gemgym-write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as e:
        raise ConfigError(
            f"cannot write the run folder --out {out} ({e.strerror or e}); choose another --out"
        ) from None


def _check_experts(made: dict[str, Any]) -> None:
    """``--agent oracle`` needs envs with an expert: a one-line error before the run."""
    for name, env in made.items():
        try:
            env.reset(seed=0)
            env.expert_action()
        except NotImplementedError as e:
            raise ConfigError(
                f"{name} has no expert ({e}), so --agent oracle cannot play it; leave it out, "
                "or use --agent random or a model"
            ) from None
        except Exception:  # any other failure is the episodes' own, reported there
            pass


def _probe(agent: Any, console: Any) -> None:
    """Check the model server before the run (raises ModelUnavailableError: exit 2)."""
    import asyncio

    probe = getattr(agent, "probe", None)
    if probe is None:
        return
    try:
        warning = asyncio.run(probe())
    except ModelUnavailableError as e:
        raise ModelUnavailableError(_flags(str(e))) from None
    if warning:
        console.print(f"warning: {_flags(warning)}", markup=False, soft_wrap=True)


def _print_problems(result: dict[str, Any], console: Any) -> None:
    """Env errors (bugs of an env) and replies with no text, loudly, on the console."""
    run, overall = result["run"], result["summary"]["overall"]
    if overall.get("env_errors"):
        first = run["env_error_examples"][0]
        console.print(
            f"warning: in {overall['env_errors']} episodes the env raised on the model's reply "
            f"(a bug of the env; scored as failures). The first, {first['env']} task "
            f"{first['task']} sample {first['sample']}: {first['error']}",
            markup=False,
            soft_wrap=True,
        )
    if overall.get("warnings"):
        first = run["warning_examples"][0]
        console.print(
            f"warning: {overall['warnings']} replies had no text. The first, {first['env']} "
            f"task {first['task']}: {_flags(first['warning'])}",
            markup=False,
            soft_wrap=True,
        )


def _print_summary(result: dict[str, Any], run_dir: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    summary = result["summary"]
    ks = list(summary["overall"]["pass_at_k"])
    table = Table(title="gemgym eval")
    cols = ["env", "tasks", "episodes", "errors", "error rate", "success"]
    cols += [f"pass@{k}" for k in ks]
    for c in cols:
        table.add_column(c, justify="left" if c == "env" else "right")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    def row(b: dict[str, Any]) -> list[str]:
        scores = [b["success_rate"], *[b["pass_at_k"][k] for k in ks]]
        shown = ["refused" if b["refused"] else pct(x) for x in scores]
        return [str(b["episodes"]), str(b["errors"]), pct(b["error_rate"]), *shown]

    for name, b in summary["envs"].items():
        table.add_row(name, str(b["tasks"]), *row(b))
    table.add_row("mean over envs", "", *row(summary["overall"]))
    stdout_console().print(table)
    Console(stderr=True).print(f"report: {run_dir.report_html}", markup=False)
