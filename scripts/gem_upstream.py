"""Run GEM's own test commands and example env loops through gemgym's switch (or on real GEM).

    python scripts/gem_upstream.py                                  # through the switch
    python scripts/gem_upstream.py --gem-src /path/to/gem           # another GEM checkout
    python scripts/gem_upstream.py --on-gem /path/to/gem-venv/bin/python   # GEM itself

From a GEM checkout (default /tmp/gemsrc) it copies ``tests/`` and ``examples/`` (never GEM's
``gem/`` package, which the switch would rightly prefer) into a scratch directory twice:
``unchanged`` as upstream has them and ``fixed`` with GEM's own bugs fixed (docs/gem-compat.md,
"Upstream bugs to fix in GEM's files"). It starts the two servers the tool tests talk to on
loopback (``gemgym serve-retriever --sample`` and the GEM time MCP server: the layer's through the
switch, GEM's own with ``--on-gem``), runs the 18 commands that can run offline on CPU in both
copies and prints pass / FAIL per command and copy, then the totals. With ``--on-gem PYTHON`` the
same commands run under GEM's interpreter with the checkout on ``PYTHONPATH`` instead of through
the switch. Commands that need a GPU, a Hub model, Docker, API keys or the network are listed as
"not run here" with the reason and not counted.

The trainer examples (rl2, OpenRLHF) need a GPU trainer; their env-side functions are driven here
as the trainer calls them (``--drive``), with a scripted policy in place of the LLM: rl2's
``reset(extra_info)`` / ``step(state, action, extra_info)`` for concurrent episodes, OpenRLHF's
``AgentInstance`` (``await __init__``, ``reset``, ``step``) for a few episodes. OpenRLHF's base
classes (and ``torch`` where it is missing) are stubbed: only their names are used.

Exit status 0 when every command passes in the fixed copy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

THIS = Path(__file__).resolve()


@dataclass(frozen=True)
class Command:
    """One upstream command: ``argv`` after the interpreter (``{retriever}``, ``{mcp}`` filled)."""

    name: str
    argv: tuple[str, ...]
    pytest: bool = False  # run by pytest (with the layer's plugin through the switch)
    drive: bool = False  # an example's env functions, driven by this script
    fail_markers: tuple[str, ...] = ()  # text in the output that means failure despite exit 0
    need_markers: tuple[str, ...] = ()  # text that must be in the output


COMMANDS: list[Command] = [
    Command("tests/test_env/test_game.py", ("-m", "tests.test_env.test_game")),
    Command("tests/test_env/test_reasoning_gym.py", ("-m", "tests.test_env.test_reasoning_gym")),
    Command("tests/test_env/test_code.py action", ("-m", "tests.test_env.test_code", "action")),
    Command(
        "tests/test_env/test_qa.py action_sequence",
        ("-m", "tests.test_env.test_qa", "action_sequence"),
    ),
    Command(
        "tests/test_env/test_qa.py test_transitions",
        ("-m", "tests.test_env.test_qa", "test_transitions"),
    ),
    Command(
        "tests/test_env/test_fifteen.py test_all", ("-m", "tests.test_env.test_fifteen", "test_all")
    ),
    Command(
        "tests/test_multiagent/test_multiagent.py test_all",
        ("-m", "tests.test_multiagent.test_multiagent"),
    ),
    Command(
        "tests/test_tool/test_python_code_tool.py single_action",
        ("-m", "tests.test_tool.test_python_code_tool", "single_action"),
    ),
    Command(
        "tests/test_tool/test_search_tool.py single_action",
        ("-m", "tests.test_tool.test_search_tool", "single_action", "--search_url", "{retriever}"),
        fail_markers=("Error during real request", "[SearchTool Error"),
    ),
    Command(
        "tests/test_tool/test_search_engine_reliability.py",
        (
            "-m",
            "tests.test_tool.test_search_engine_reliability",
            "--url",
            "{retriever}",
            "--concurrent_requests",
            "10",
            "--total_requests",
            "40",
        ),
        need_markers=("Failed Requests: 0",),
    ),
    Command(
        "tests/test_tool/test_time_mcp.py (pytest)",
        ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_tool/test_time_mcp.py"),
        pytest=True,
    ),
    Command(
        "tests/test_tool/test_mcp_tool.py single_action",
        ("-m", "tests.test_tool.test_mcp_tool", "single_action", "--mcp_url", "{mcp}"),
        fail_markers=("Error during MCP request",),
    ),
    Command(
        "examples/train_rl2/async_single_turn.py",
        ("rl2", "examples/train_rl2/async_single_turn.py"),
        drive=True,
    ),
    Command(
        "examples/train_rl2/async_multi_turn.py",
        ("rl2", "examples/train_rl2/async_multi_turn.py"),
        drive=True,
    ),
    Command(
        "examples/train_rl2/vec_multi_turn.py",
        ("rl2", "examples/train_rl2/vec_multi_turn.py"),
        drive=True,
    ),
    Command(
        "examples/train_openrlhf/agent_func_single_turn.py",
        ("openrlhf", "examples/train_openrlhf/agent_func_single_turn.py"),
        drive=True,
    ),
    Command(
        "examples/train_openrlhf/agent_func_multi_turn_template.py",
        ("openrlhf", "examples/train_openrlhf/agent_func_multi_turn_template.py"),
        drive=True,
    ),
    Command(
        "examples/train_openrlhf/agent_func_multi_turn_notemplate.py",
        ("openrlhf", "examples/train_openrlhf/agent_func_multi_turn_notemplate.py"),
        drive=True,
    ),
]

NOT_RUN: list[tuple[str, str]] = [
    ("tests/test_env/test_code.py llm_episode, evaluate", "GPU (vLLM) and a Hub model"),
    (
        "tests/test_env/test_qa.py e2e_llm_episode, evaluate_llm, benchmark_llm",
        "GPU (vLLM), Hub model",
    ),
    ("tests/test_env/test_math.py (all)", "GPU (vLLM), Hub model and data"),
    ("tests/test_env/test_terminal.py (all)", "Docker, an OpenAI API key"),
    ("tests/test_env/test_webshop.py", "a Hub tokenizer (Qwen3) and WebShop's full data"),
    (
        "tests/test_env/test_wikigame.py (all)",
        "kiwix-serve with Wikipedia's ZIM or the MediaWiki API",
    ),
    ("tests/test_tool/test_python_code_tool.py episode, llm_episode, ...", "Hub tokenizer; GPU"),
    ("tests/test_tool/test_search_tool.py episode, llm_episode, ...", "Hub tokenizer; GPU"),
    ("tests/test_tool/test_mcp_tool.py multi_server", "the context7 MCP server (network)"),
    ("tests/test_tool/test_mcp_tool.py episode, llm_episode, mcpmark_openai", "Hub; GPU; API keys"),
    ("examples/register_new_env.py", "case 1 loads axon-rl/GSM-8k from the Hub"),
    ("examples/train_oat, train_verl, train_tinker", "GPU trainers; a Tinker API key"),
    ("examples/multiagent/tau_bench_retail", "an LLM (see scripts/gem_tau_bench_fake_llm.py)"),
]


# -- GEM's own bugs, fixed in the "fixed" copy ---------------------------------------------------
def fix_upstream_bugs(root: Path) -> list[str]:
    """Apply docs/gem-compat.md's "Upstream bugs to fix" to a copy of GEM's tests and examples;
    returns the files changed."""
    changed = []
    unregistered = re.compile(r"game:GuessTheNumber-v0(?![-\w])")
    for path in sorted([*root.glob("tests/**/*.py"), *root.glob("examples/**/*.py")]):
        text = original = path.read_text()
        text = unregistered.sub("game:GuessTheNumber-v0-hard", text)  # GEM registers -easy/-hard
        text = text.replace(  # renamed in gem.utils.debug
            "run_and_print_episode_with_random_selection",
            "run_and_print_episode_with_selective_step",
        )
        text = text.replace(  # moved; AgentSelector is only in the module
            "from gem.multiagent import", "from gem.envs.multiagent.multi_agent_env import"
        )
        text = text.replace("qa:NatualQuestions", "qa:NaturalQuestions")  # typo
        text = text.replace("+ '\\n' for row in", "+ chr(10) for row in")  # f-string, Python < 3.12
        if text != original:
            path.write_text(text)
            changed.append(str(path.relative_to(root)))
    return changed


# -- servers -------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.3)
    raise SystemExit(f"{what} did not listen on {port} within {timeout:.0f} s")


@contextlib.contextmanager
def servers(gem_python: str | None, env: dict[str, str], log_dir: Path) -> Iterator[dict[str, str]]:
    """gemgym's sample retriever and a time MCP server (GEM's own under ``gem_python``)."""
    r_port, m_port = _free_port(), _free_port()
    retriever = [
        sys.executable,
        "-m",
        "gemgym",
        "serve-retriever",
        "--sample",
        "--port",
        str(r_port),
    ]
    time_mcp = ["-m", "gem.tools.mcp_server.time_mcp", "--port", str(m_port), "--path", "/time-mcp"]
    if gem_python is None:
        mcp_cmd = [sys.executable, "-m", "gemgym.compat.gem", *time_mcp]
    else:
        mcp_cmd = [gem_python, *time_mcp]
    procs = []
    try:
        for name, cmd, port in [("retriever", retriever, r_port), ("time MCP", mcp_cmd, m_port)]:
            log = (log_dir / f"server-{name.replace(' ', '_')}.log").open("wb")
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            procs.append(proc)
            _wait_port(port, proc, name)
        yield {
            "retriever": f"http://127.0.0.1:{r_port}/retrieve",
            "mcp": f"http://127.0.0.1:{m_port}/time-mcp",
        }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- running the commands ------------------------------------------------------------------------
@dataclass
class Result:
    command: Command
    passed: dict[str, bool] = field(default_factory=dict)  # copy -> pass
    why: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _argv(cmd: Command, gem_python: str | None, urls: dict[str, str]) -> list[str]:
    args = [a.format(**urls) for a in cmd.argv]
    if cmd.drive:
        args = [str(THIS), "--drive", *args]
    if gem_python is not None:
        return [gem_python, *args]
    if cmd.pytest:
        return [sys.executable, *args[:2], "-p", "gemgym.compat.gem.pytest_plugin", *args[2:]]
    return [sys.executable, "-m", "gemgym.compat.gem", *args]


def run_one(
    cmd: Command,
    cwd: Path,
    gem_python: str | None,
    urls: dict[str, str],
    env: dict[str, str],
    timeout: float,
    log: Path,
) -> tuple[bool, str, float]:
    argv = _argv(cmd, gem_python, urls)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out, rc = out + f"\n[timed out after {timeout:.0f} s]", -1
    seconds = time.monotonic() - start
    log.write_text(f"$ {' '.join(argv)}\n(cwd {cwd})\n{out}\n[exit {rc}]\n")
    if rc != 0:
        lines = [ln for ln in out.splitlines() if ln.strip()]
        return False, (lines[-1][:140] if lines else f"exit {rc}"), seconds
    for marker in cmd.fail_markers:
        if marker in out:
            return False, f"output has {marker!r}", seconds
    for marker in cmd.need_markers:
        if marker not in out:
            return False, f"output lacks {marker!r}", seconds
    return True, "", seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gem-src", type=Path, default=Path("/tmp/gemsrc"), help="GEM checkout")
    parser.add_argument("--on-gem", metavar="PYTHON", help="run on real GEM with this interpreter")
    parser.add_argument("-k", default="", help="run only commands whose name contains this")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per command")
    parser.add_argument("--keep", type=Path, help="scratch directory to use and keep (logs)")
    args = parser.parse_args(argv)

    src = args.gem_src.resolve()
    if not (src / "tests").is_dir() or not (src / "gem").is_dir():
        raise SystemExit(f"{src} is not a GEM checkout (no tests/ and gem/ there)")
    scratch = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="gem-upstream-"))
    copies = {}
    for name in ("unchanged", "fixed"):
        root = scratch / name
        shutil.rmtree(root, ignore_errors=True)
        for part in ("tests", "examples"):
            shutil.copytree(src / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
        copies[name] = root
    changed = fix_upstream_bugs(copies["fixed"])
    logs = scratch / "logs"
    logs.mkdir(exist_ok=True)

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)
    if args.on_gem:
        env["PYTHONPATH"] = str(src)  # GEM's package from the checkout
    head = "not a git checkout"
    with contextlib.suppress(Exception):
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    where = f"real GEM ({args.on_gem})" if args.on_gem else "gemgym's switch"
    print(f"GEM checkout {src} (HEAD {head}); running on {where}; scratch {scratch}")
    print(f"fixed copy: {len(changed)} files patched ({', '.join(changed)})")

    commands = [c for c in COMMANDS if args.k in c.name]
    results = []
    with servers(args.on_gem, env, logs) as urls:
        for cmd in commands:
            result = Result(cmd)
            for copy_name, root in copies.items():
                slug = re.sub(r"[^\w.]+", "_", cmd.name) + f".{copy_name}.log"
                ok, why, secs = run_one(
                    cmd, root, args.on_gem, urls, env, args.timeout, logs / slug
                )
                result.passed[copy_name], result.why[copy_name] = ok, why
                result.seconds[copy_name] = secs
            results.append(result)
            marks = "  ".join(
                f"{c}: {'pass' if result.passed[c] else 'FAIL'} ({result.seconds[c]:.0f} s)"
                for c in copies
            )
            print(f"{cmd.name:60} {marks}")
            for c in copies:
                if not result.passed[c]:
                    print(f"    {c}: {result.why[c]}")
    print("\nnot run here (not counted):")
    for name, why in NOT_RUN:
        print(f"    {name:60} {why}")
    unchanged = sum(r.passed["unchanged"] for r in results)
    fixed = sum(r.passed["fixed"] for r in results)
    print(
        f"\n{len(results)} commands on {where}: {unchanged} pass unchanged, "
        f"{fixed} pass with GEM's bugs fixed; logs in {logs}"
    )
    return 0 if fixed == len(results) else 1


# -- driving the trainer examples' env functions -------------------------------------------------
def _load_example(path: Path) -> types.ModuleType:
    sys.path.insert(0, str(Path.cwd()))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _guess(rng: random.Random, observation: str) -> str:
    if "letter" in observation.lower() or "how many" in observation.lower():
        return f"\\boxed{{{rng.randint(0, 5)}}}"
    return f"\\boxed{{{rng.randint(1, 50)}}}"


def drive_rl2(path: Path) -> None:
    """rl2 calls ``reset(extra_info)`` then ``step(state, action, extra_info)`` until ``done``,
    for many episodes at once (the vectorised example needs a whole cohort of NUM_ENVS)."""
    module = _load_example(path)
    n = 2 * int(getattr(module, "NUM_ENVS", 8))

    async def episode(idx: int) -> tuple[int, float]:
        rng = random.Random(idx)
        state = await module.reset({"idx": idx})
        assert isinstance(state, str) and state, "reset gave no observation"
        steps, total, done = 0, 0.0, False
        while not done:
            out = await module.step(state, _guess(rng, state), {"idx": idx})
            state, done = out["next_state"], bool(out["done"])
            total += float(out["reward"])
            steps += 1
            assert steps <= 100, "the episode did not end"
        return steps, total

    async def run_all() -> list[tuple[int, float]]:
        return await asyncio.gather(*(episode(i) for i in range(n)))

    results = asyncio.run(asyncio.wait_for(run_all(), 240))
    print(
        f"{len(results)} episodes; steps {sorted({s for s, _ in results})}; "
        f"return {sum(r for _, r in results) / len(results):.3f}"
    )
    assert len(results) == n


def _stub_openrlhf() -> None:
    if importlib.util.find_spec("openrlhf") is None:
        agent = types.ModuleType("openrlhf.utils.agent")
        agent.AgentInstanceBase = type("AgentInstanceBase", (), {})  # type: ignore[attr-defined]
        agent.AgentExecutorBase = type(  # type: ignore[attr-defined]
            "AgentExecutorBase", (), {"__init__": lambda self, *a, **k: None}
        )
        for name in ("openrlhf", "openrlhf.utils"):
            sys.modules[name] = types.ModuleType(name)
        sys.modules["openrlhf.utils.agent"] = agent
    if importlib.util.find_spec("torch") is None:
        torch = types.ModuleType("torch")
        torch.tensor = lambda x, *a, **k: x  # type: ignore[attr-defined]
        sys.modules["torch"] = torch


def drive_openrlhf(path: Path) -> None:
    """OpenRLHF awaits ``AgentInstance.__init__``, then ``reset(states, seed=)`` and
    ``step(states)`` with the model's reply until ``done``."""
    _stub_openrlhf()
    module = _load_example(path)
    cls = module.AgentInstance

    async def run_all() -> list[int]:
        steps_per_episode = []
        for k in range(4):
            agent = cls.__new__(cls)
            await agent.__init__()
            rng = random.Random(k)
            first = await agent.reset({"observation": "prompt", "label": ""}, seed=k)
            observation = first["observation"]
            done, steps = False, 0
            while not done:
                action = _guess(rng, observation)
                out = await agent.step(
                    {"observation_text": observation, "action_text": action, "label": ""}
                )
                assert isinstance(out["environment_feedback"], str)
                observation += action + out["environment_feedback"]
                done, steps = bool(out["done"]), steps + 1
                assert steps <= 100, "the episode did not end"
            steps_per_episode.append(steps)
        return steps_per_episode

    steps = asyncio.run(asyncio.wait_for(run_all(), 240))
    print(f"{len(steps)} episodes; steps {steps}")


def drive(kind: str, path: str) -> int:
    {"rl2": drive_rl2, "openrlhf": drive_openrlhf}[kind](Path(path))
    print("driver: ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--drive":
        sys.exit(drive(sys.argv[2], sys.argv[3]))
    sys.exit(main())
