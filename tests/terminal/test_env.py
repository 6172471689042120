"""The terminal env: actions, limits, grading that the agent cannot tamper with, the loader."""

from __future__ import annotations

import os
import pickle
import textwrap
import time
from pathlib import Path

import pytest

import gemgym
from gemgym.envs.terminal.env import TerminalEnv, parse_action
from gemgym.envs.terminal.loader import load_task, load_tasks
from gemgym.errors import (
    ConfigError,
    ResetNeeded,
    SandboxUnavailableError,
    UnknownParameterError,
)
from gemgym.sandbox.bwrap import bwrap_available
from helpers.extras import needs_module

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

TESTS = """\
import subprocess


def test_program_prints_42():
    done = subprocess.run(["python3", "/app/prog.py"], capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == "42"


def test_answer_file():
    assert open("/app/answer.txt").read().strip() == "42"
"""


def _write_task(root: Path, name: str = "answer-42") -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "instruction.md").write_text(
        "Write /app/prog.py, a program that prints 42, and /app/answer.txt holding 42.\n"
    )
    (task / "tests" / "test_outputs.py").write_text(TESTS)
    (task / "solution" / "solve.sh").write_text(
        "echo 'print(42)' > /app/prog.py\necho 42 > /app/answer.txt\n"
    )
    return task


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return _write_task(tmp_path / "tasks").parent


def _finish(env: TerminalEnv, *commands: str) -> tuple[str, float, dict[str, object]]:
    for command in commands:
        obs, _, terminated, truncated, _ = env.step(f"```bash\n{command}\n```")
        assert not (terminated or truncated), obs
    obs, reward, terminated, _, info = env.step("done")
    assert terminated
    return obs, reward, info


def test_parse_action() -> None:
    assert parse_action("I will list files.\n```bash\nls -la\n```") == ("command", "ls -la")
    assert parse_action("```sh\na\n```\n```bash\nb\nc\n```") == ("command", "b\nc")
    assert parse_action("pwd") == ("command", "pwd")
    assert parse_action("  Done \n") == ("done", "")
    assert parse_action("```bash\nsubmit\n```") == ("done", "")
    assert parse_action("<keys>q^C</keys>") == ("keys", "q^C")
    assert parse_action("") == ("empty", "")
    assert parse_action(None) == ("empty", "")


@needs_bwrap
def test_reference_solution_and_fraction_passed(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir)) as env:
        obs, info = env.reset(seed=1)
        assert "prints 42" in obs and "```bash" in obs and info["task"] == "answer-42"
        obs, reward, info = _finish(env, "echo 'print(42)' > prog.py", "echo 41 > answer.txt")
        assert reward == 0.0 and info["tests_passed"] == 1 and info["tests_total"] == 2
        assert info["fraction_passed"] == 0.5 and "answer_file" in str(info["test_failures"])
        assert "[graded: 1/2 tests passed]" in obs
        env.reset()
        assert env.step(env.expert_action())[1] == 0.0
        assert env.step(env.expert_action())[1] == 1.0
        with pytest.raises(ResetNeeded):
            env.step("ls")


TAMPERING = [
    # The agent writes its own tests, runners and plugins where a test runner might look.
    "mkdir -p tests && printf 'def test_ok():\\n    pass\\n' > tests/test_outputs.py",
    "printf 'def test_ok():\\n    pass\\n' > test_outputs.py; cp test_outputs.py conftest.py",
    "printf 'import builtins\\nbuiltins.AssertionError = type(None)\\n' > sitecustomize.py",
    "mkdir -p bin && printf '#!/bin/sh\\necho 2 passed\\n' > bin/pytest && chmod +x bin/pytest",
    "printf '#!/bin/sh\\necho PASSED; exit 0\\n' > run-tests.sh && chmod +x run-tests.sh",
    "mkdir /tests 2>&1; echo '{\"done\": true}'",
    "echo 41 > answer.txt",
]

FORGER = r"""
import json, os, signal
names = ["test_outputs.py::test_program_prints_42", "test_outputs.py::test_answer_file"]
fake = "".join(json.dumps({"test": n, "passed": True}) + "\n" for n in names)
fake += json.dumps({"done": True}) + "\n"
for target in ("/tests/test_outputs.py", "/tests/new_test.py"):
    try:
        open(target, "w").write("def test_x():\n    pass\n")
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                f.write(fake)
        except OSError:
            pass
print(fake)
print(41)
if os.environ.get("KILL"):
    os.kill(os.getppid(), signal.SIGKILL)
"""


@needs_bwrap
def test_an_agent_cannot_tamper_with_grading(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir)) as env:
        env.reset(seed=0)
        obs, reward, info = _finish(env, *TAMPERING, "echo 'print(41)' > prog.py")
        assert reward == 0.0 and info["tests_passed"] == 0 and info["tests_total"] == 2
        # A program under test that forges verdicts through /proc, rewrites the tests and
        # prints a fake report: only the honest test passes.
        env.reset(seed=0)
        forger = f"cat > prog.py <<'EOF'\n{FORGER}\nEOF\necho 42 > answer.txt"
        obs, reward, info = _finish(env, forger)
        assert reward == 0.0 and info["tests_passed"] == 1, info
        assert "test_program_prints_42" in str(info["test_failures"])
        # One that kills the test runner ends the grading with nothing passed after it.
        env.reset(seed=0)
        obs, reward, info = _finish(env, forger.replace('os.environ.get("KILL")', "True"))
        assert reward == 0.0 and info["fraction_passed"] < 1.0


@needs_bwrap
def test_hidden_tests_and_solution_are_not_visible_to_the_agent(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir)) as env:
        env.reset(seed=0)
        command = (
            "ls /tests; find / -path /usr -prune -o -name 'test_*.py' -print -o -name solve.sh"
        )
        obs = env.step(command + " 2>/dev/null")[0]
        assert "No such file" in obs and "test_outputs.py" not in obs.split("\n", 1)[1]
        assert "solve.sh" not in obs


@needs_bwrap
def test_turn_limit_and_time_budget_end_the_episode_graded(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir), max_turns=2) as env:
        env.reset(seed=0)
        assert env.step(env.expert_action())[2:4] == (False, False)
        obs, reward, terminated, truncated, info = env.step("```bash\nls\n```")
        assert (reward, terminated, truncated) == (1.0, False, True)
        assert info["turn_limit"] and info["ended_by"] == "turns"
    with TerminalEnv(path=str(task_dir), command_timeout=5, episode_timeout=1.0) as env:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("sleep 3")
        assert truncated and info["ended_by"] == "time" and "time budget" in obs
    with TerminalEnv(path=str(task_dir), command_timeout=0.5) as env:
        env.reset(seed=0)
        obs, _, _, _, info = env.step("sleep 5")
        assert info["killed_by"] == "timeout" and "exit status 124" in obs


@needs_bwrap
def test_keystrokes_format_errors_and_output_cut(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir), max_output_chars=200) as env:
        env.reset(seed=0)
        obs, reward, _, _, info = env.step("")
        assert info["format_error"] and reward == 0.0
        assert env.step("```bash\necho hi\n```")[0] == "hi\n[exit status 0]"
        assert env.step("printf x; false")[0] == "x\n[exit status 1]"
        obs = env.step("<keys>python3 -q\\n</keys>")[0]
        assert "still running" in obs
        obs, _, _, _, info = env.step("print(6 * 7)")  # typed into the running interpreter
        assert "42" in obs and info["typed_into_running_program"]
        assert env.expert_action() == "<keys>^C</keys>"
        obs = env.step("<keys>exit()\\n</keys>")[0]
        assert "[exit status 0]" in obs
        obs = env.step("seq 1 100000")[0]
        assert "characters cut" in obs and len(obs) < 300 and obs.rstrip().endswith("]")


@needs_bwrap
def test_copies_replay_the_episode(task_dir: Path) -> None:
    with TerminalEnv(path=str(task_dir)) as env:
        env.reset(seed=3)
        env.step("echo remembered > note.txt")
        for copy in (pickle.loads(pickle.dumps(env)), env.spawn(same_state=True)):
            with copy:
                assert copy.step("cat note.txt")[0] == env.step("cat note.txt")[0]


def _tb1_task(root: Path) -> Path:
    """A task in Terminal-Bench 1.0's layout (task.yaml, solution.sh)."""
    one = root / "a-task"
    (one / "tests").mkdir(parents=True)
    (one / "tests" / "test_x.py").write_text("def test_x():\n    assert True\n")
    (one / "solution.sh").write_text("true\n")
    (one / "task.yaml").write_text(
        textwrap.dedent(
            """\
            instruction: |
              Do nothing at all.
            max_agent_timeout_sec: 60
            category: demo
            """
        )
    )
    return one


def test_loader_reads_terminal_bench_1_layout(tmp_path: Path) -> None:
    needs_module("yaml", "terminal")
    _write_task(tmp_path / "suite", "b-task")
    one = _tb1_task(tmp_path / "suite")
    tasks = load_tasks(tmp_path / "suite")
    assert [t.name for t in tasks] == ["a-task", "b-task"]
    assert tasks[0].instruction == "Do nothing at all." and tasks[0].agent_timeout == 60
    assert tasks[0].solution == "true\n" and tasks[0].metadata["category"] == "demo"
    assert load_tasks(one)[0].name == "a-task"


def test_loader_errors(tmp_path: Path) -> None:
    one = _write_task(tmp_path / "suite", "a-task")
    with pytest.raises(ConfigError, match="does not exist"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(ConfigError, match="holds no terminal task"):
        load_tasks(tmp_path)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "instruction.md").write_text("x")
    with pytest.raises(ConfigError, match="no tests"):
        load_task(tmp_path / "bad")
    (one / "task.toml").write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_task(one)
    (one / "task.toml").write_text('[environment]\nrequires = ["no-such-tool-here"]\n')
    with pytest.raises(SandboxUnavailableError, match="no-such-tool-here"):
        TerminalEnv(path=str(one)).reset()
    (one / "task.toml").write_text('[environment]\nrequires = "git"\n')
    with pytest.raises(ConfigError, match="list of command names"):
        load_task(one)
    with pytest.raises(ConfigError, match="no shipped terminal task"):
        TerminalEnv(task="no-such-task")
    with pytest.raises(UnknownParameterError):
        gemgym.make("terminal:hello-file", colour="red")
    with pytest.raises(ConfigError, match="docker"):
        TerminalEnv(task="hello-file", backend="docker")


@needs_bwrap
def test_dir_env_draws_tasks_by_seed_and_by_name(task_dir: Path) -> None:
    _write_task(task_dir, "other-task")
    with gemgym.make("terminal:dir", path=str(task_dir)) as env:
        drawn = {env.reset(seed=s)[1]["task"] for s in range(8)}
        assert drawn == {"answer-42", "other-task"}
        assert env.reset(seed=5)[1] == env.reset(seed=5)[1]
        assert env.reset(options={"task": "other-task"})[1]["task"] == "other-task"
        with pytest.raises(ConfigError, match="no task"):
            env.reset(options={"task": "nope"})


def _bwrap_children() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"bwrap" in cmd:
            found.append(int(entry.name))
    return found


@needs_bwrap
def test_sandboxes_started_ahead_are_used_and_closed(task_dir: Path) -> None:
    before = set(_bwrap_children())  # other tests' warm sandboxes (a shared tool pool) stay
    env = TerminalEnv(path=str(task_dir))
    env.reset(seed=0)
    time.sleep(1.0)  # the grader's sandbox starts meanwhile
    start = time.monotonic()
    assert env.step("done")[1] == 0.0
    time.sleep(1.0)
    env.reset(seed=0)  # takes the sandbox started during grading
    assert time.monotonic() - start < 30
    env.close()  # waits for the grader's sandbox still starting, and closes it
    assert set(_bwrap_children()) - before == set()
    with TerminalEnv(path=str(task_dir), prestart=False) as plain:
        plain.reset(seed=0)
        assert plain.step("done")[1] == 0.0


@needs_bwrap
def test_a_task_without_a_reference_solution_plays_and_grades(tmp_path: Path) -> None:
    """Benchmarks that keep their solutions hidden: only the expert needs solve.sh."""
    task = _write_task(tmp_path / "tasks", "hidden-solution")
    (task / "solution" / "solve.sh").unlink()
    assert not load_task(task).has_solution
    env = TerminalEnv(path=str(task), prestart=False)
    try:
        env.reset(seed=0)
        obs, reward, terminated, _, _ = env.step("```bash\necho 'print(42)' > /app/prog.py\n```")
        assert not terminated and reward == 0.0
        env.step("```bash\necho 42 > /app/answer.txt\n```")
        _, reward, terminated, _, info = env.step("done")
        assert terminated and reward == 1.0 and info["tests_passed"] == 2
        env.reset(seed=0)
        with pytest.raises(
            NotImplementedError, match=r"no reference solution.*expert \(OracleAgent\)"
        ):
            env.expert_action()
    finally:
        env.close()


@needs_bwrap
def test_the_cli_plays_a_task_without_a_solution_and_only_oracle_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main

    task = _write_task(tmp_path / "tasks", "hidden-solution")
    (task / "solution" / "solve.sh").unlink()
    args = ["terminal:dir", "--env-kwarg", f"path={task}", "--quiet"]
    out = ["--out", str(tmp_path / "t.jsonl")]
    assert main(["run", *args, "--agent", "random", "--episodes", "1", *out]) == 0
    assert main(["run", *args, "--agent", "oracle", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "task 'hidden-solution' has no reference solution (solution/solve.sh)" in err
    assert "so --agent oracle cannot play it" in err and "Traceback" not in err
    assert err.count("gemgym: error:") == 1


@needs_bwrap
def test_non_text_and_unencodable_actions_are_the_models_format_errors(task_dir: Path) -> None:
    env = TerminalEnv(path=str(task_dir), prestart=False)
    try:
        env.reset(seed=0)
        for bad in (None, 123, b"ls", ["ls"], {"cmd": "ls"}):
            obs, reward, terminated, truncated, info = env.step(bad)  # type: ignore[arg-type]
            assert (reward, terminated, truncated) == (0.0, False, False)
            assert info["format_error"] is True
            assert info["non_text_action"] == type(bad).__name__
            assert type(bad).__name__ in obs
        # a lone surrogate cannot be sent as UTF-8: the command runs with it replaced
        obs, reward, terminated, _, info = env.step("```bash\necho 'a\ud800b'\n```")
        assert not terminated and "a?b" in obs
    finally:
        env.close()


@needs_bwrap
def test_a_huge_command_is_a_format_error_not_run(task_dir: Path) -> None:
    env = TerminalEnv(path=str(task_dir), prestart=False)
    try:
        env.reset(seed=0)
        huge = "```bash\n" + "echo x > /app/answer.txt\n" * 44_000 + "```"
        started = time.monotonic()
        obs, reward, terminated, _, info = env.step(huge)
        assert time.monotonic() - started < 5
        assert info["format_error"] is True and not terminated and reward == 0.0
        assert "too long" in obs and len(obs) < 1_000
        obs, *_ = env.step("```bash\ncat /app/answer.txt || echo missing\n```")
        assert "missing" in obs
    finally:
        env.close()
