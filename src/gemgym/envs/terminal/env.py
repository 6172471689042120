r"""Terminal tasks: work in a sandboxed shell until done; hidden tests grade the result.

============  =================================================================================
ids           ``terminal:<task>`` for each shipped task (``gemgym list terminal:``), and
              ``terminal:dir``: every task of a directory, one drawn per episode (seeded;
              ``options={"task": name}`` picks one); ``path=`` a directory of tasks or one task
              in the Terminal-Bench layout (default: the shipped tasks)
observation   reset: the task's instruction and the action format; step: the command's output
              (stdout and stderr as the terminal showed them, cut to ``max_output_chars`` around
              a ``[... N characters cut ...]`` line) and ``[exit status N]``, or a line saying
              the program still runs / was stopped at the command timeout
action        one command per step: the last fenced ```` ```bash ```` (or ``sh``/``shell``/plain)
              block, else the whole text; it may span lines and its effects persist (``cd``,
              ``export``). ``<keys>…</keys>`` types keystrokes instead (``\n`` Enter, ``^C``
              Ctrl-C, ``\xHH``, ``\e``); a command sent while a program started by keystrokes
              still runs is typed into it. ``done`` (or ``submit``) ends the episode
reward        at the end (``done``, the turn limit or the episode's time budget): 1.0 if every
              hidden test passes, else 0.0; ``info["tests_passed"]``, ``["tests_total"]``,
              ``["fraction_passed"]``, ``["test_failures"]`` (test -> exception type). Other steps:
              0.0. An empty action, or one that is not a ``str`` (gemgym's one rule:
              ``info["non_text_action"]`` names its type), or a command over 65,536
              characters, is a format error (0.0, the episode goes on)
expert        replays the task's reference solution (``solution/solve.sh``), then ``done``;
              a task without one plays and grades as any other, only the expert cannot play it
kwargs        ``task``, ``path``, ``max_turns`` (30), ``command_timeout`` (30 s),
              ``episode_timeout`` (600 s of command time), ``max_output_chars`` (4000),
              ``limits`` (a :class:`gemgym.sandbox.Limits`), ``workspace_size`` (128 MiB),
              ``backend`` (``"bwrap"``; see docs/terminal.md for docker), ``prestart``
              (``True``: start the grader's and the next episode's sandboxes in the background)
============  =================================================================================

The shell is one long-lived ``bash`` in a hardened bubblewrap sandbox
(:class:`gemgym.sandbox.shell.ShellSession`): uid 65534, no network, seccomp, cgroups, a
writable ``/app`` and ``/tmp`` over the host's read-only ``/usr`` (no host venv, gemgym masked:
no task's tests or solutions are visible). Grading exports ``/app``, ends the session, and runs
the task's tests in a **fresh** sandbox over that copy: the test modules reach it in memory only
(never on a file system the agent's programs can read), and a trusted, not-dumpable process
reports each test's verdict through a pipe only it holds: nothing the agent wrote (test files, a
fake ``pytest``, a ``conftest.py``, printed "PASSED", an exit status) counts, and failures come
back as exception types only. See docs/terminal.md, "Threat model".
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from gemgym.core import Env, non_text_info
from gemgym.envs.terminal.loader import (
    SHIPPED_TASKS,
    TerminalTask,
    load_task,
    load_tasks,
    shipped_task_names,
)
from gemgym.errors import ConfigError, GradingError, SandboxError, SandboxUnavailableError
from gemgym.registry import register
from gemgym.sandbox.base import Limits
from gemgym.tools.base import truncate_output
from gemgym.turns import TurnCounter, check_turn_limit

__all__ = ["TerminalConfig", "TerminalEnv", "parse_action"]

_BLOCK_RE = re.compile(r"```[ \t]*(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_KEYS_RE = re.compile(r"<keys>(.*?)</keys>", re.DOTALL)
_DONE = {"done", "submit", "<done>", "<submit>", "exit_task"}
_RANDOM_COMMANDS = ("ls", "pwd", "echo hello", "true", "false", "ls | wc -l", "cd /app", "done")

_FORMAT = (
    "You are working in a Linux shell (bash) in the directory /app; there is no network. "
    "Reply with one shell command per turn in a ```bash block; you see its output and exit "
    "status. To type keystrokes into a running program instead, write <keys>...</keys> "
    "(\\n is Enter, ^C is Ctrl-C). When the task is complete, reply with just: done"
)


MAX_COMMAND_CHARS = 65_536
"""The longest command or keystroke string run; a longer one is a format error, not run (a 2 MB
reply of 44,000 lines would take the shell tens of seconds to read)."""


def _encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) replaced by ``?``: a model's
    reply is sent to the shell as UTF-8, and a bad code point is the model's, not a crash."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def parse_action(action: object) -> tuple[str, str]:
    """``(kind, payload)``: kind ``"done"``, ``"keys"``, ``"command"`` or ``"empty"``."""
    if not isinstance(action, str):
        return "empty", ""
    keys = _KEYS_RE.findall(action)
    blocks = _BLOCK_RE.findall(action)
    if keys and not blocks:
        return "keys", keys[-1]
    text = blocks[-1] if blocks else action
    if text.strip().lower() in _DONE:
        return "done", ""
    if not text.strip():
        return "empty", ""
    return "command", text.strip("\n")


@dataclass(frozen=True)
class TerminalConfig:
    """The env's settings (see the module docstring)."""

    task: str | None = None
    path: str | None = None
    max_turns: int | None = 30
    command_timeout: float = 30.0
    episode_timeout: float = 600.0
    max_output_chars: int | None = 4000
    limits: Limits | None = None
    workspace_size: int = 128 << 20
    backend: str = "bwrap"
    prestart: bool = True

    def validate(self) -> None:
        check_turn_limit(self.max_turns)
        for name in ("command_timeout", "episode_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.max_output_chars is not None and (
            isinstance(self.max_output_chars, bool)
            or not isinstance(self.max_output_chars, int)
            or self.max_output_chars < 100
        ):
            raise ConfigError(
                f"max_output_chars must be an int >= 100 or None, got {self.max_output_chars!r}"
            )
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise ConfigError(f"limits must be a gemgym.sandbox.Limits, got {self.limits!r}")
        if self.backend != "bwrap":
            raise ConfigError(
                f"backend {self.backend!r} is not available: terminal envs run on 'bwrap' "
                "(a docker backend is described in docs/terminal.md but not shipped)"
            )


class TerminalEnv(Env[str, str]):
    """A shell task graded by hidden tests (see the module docstring)."""

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": True}

    blocking_io = True  # a shell in a sandbox; grading starts another

    def __init__(
        self,
        task: str | None = None,
        path: str | None = None,
        max_turns: int | None = 30,
        command_timeout: float = 30.0,
        episode_timeout: float = 600.0,
        max_output_chars: int | None = 4000,
        limits: Limits | None = None,
        workspace_size: int = 128 << 20,
        backend: str = "bwrap",
        prestart: bool = True,
    ) -> None:
        self.config = TerminalConfig(
            task,
            path,
            max_turns,
            command_timeout,
            episode_timeout,
            max_output_chars,
            limits,
            workspace_size,
            backend,
            prestart,
        )
        self.config.validate()
        root = Path(path).expanduser() if path is not None else SHIPPED_TASKS
        if task is not None:
            tasks = [t for t in load_tasks(root) if t.name == task] if path else []
            if path is None:
                if task not in shipped_task_names():
                    raise ConfigError(
                        f"no shipped terminal task {task!r}; the tasks are: "
                        f"{', '.join(shipped_task_names())}"
                    )
                tasks = [load_task(root / task)]
            if not tasks:
                raise ConfigError(f"no task {task!r} in {str(root)!r}")
        else:
            tasks = load_tasks(root)
        self.tasks: list[TerminalTask] = tasks
        self._hide = [str(SHIPPED_TASKS), str(root.resolve())]
        self.current: TerminalTask | None = None
        self._session: Any = None
        self._turns = TurnCounter(max_turns)
        self._used = 0.0
        self._busy = False
        self._done = True
        self._episode: tuple[int | None, dict[str, Any] | None, list[str]] | None = None
        self._solution_sent = False
        self._expert_script: str | None = None
        self._spares: dict[str, Future[Any]] = {}
        self._spares_lock = threading.Lock()  # warmup (another thread) against close

    # -- episode -------------------------------------------------------------------------------
    def _limits(self) -> Limits:
        base = self.config.limits or Limits(timeout=self.config.command_timeout)
        cpu = self.config.episode_timeout + 5.0
        return Limits(
            timeout=self.config.command_timeout,
            cpu_time=base.cpu_time or cpu,
            memory=base.memory,
            max_processes=base.max_processes,
            max_output=base.max_output,
            max_file_size=base.max_file_size,
            tmp_size=base.tmp_size,
        )

    def _new_session(self, tests: Path | None = None) -> Any:
        from gemgym.sandbox.shell import ShellSession

        return ShellSession(
            self._limits(),
            workspace_size=self.config.workspace_size,
            tests=tests,
            hide=self._hide,
        )

    def _prestart(self, tests: Path | None = None) -> None:
        """Start the next sandbox in the background (the episode's, or the grader's for
        ``tests``), so that the next reset or grading finds it ready."""
        key = str(tests) if tests is not None else ""
        with self._spares_lock:
            if not self.config.prestart or self._closed or key in self._spares:
                return
            self._spares[key] = _prestarter().submit(self._new_session, tests)

    def warmup(self) -> None:
        """Start the first episode's sandbox now and wait until it runs, so that the first
        :meth:`reset` finds it ready (with ``prestart=False``, or once closed: nothing)."""
        self._prestart()
        with self._spares_lock:
            spare = self._spares.get("")
        if spare is not None:
            with contextlib.suppress(Exception):  # the reset that takes it raises the cause
                spare.result()

    def _take_session(self, tests: Path | None = None) -> Any:
        """A started sandbox: the one started in the background for this use, or a new one."""
        with self._spares_lock:
            spare = self._spares.pop(str(tests) if tests is not None else "", None)
        if spare is not None:
            try:
                session = spare.result()
                if not session.closed:
                    return session
            except Exception:  # start one here instead, where its error reaches the caller
                pass
        return self._new_session(tests)

    def _drop_spares(self, keep: tuple[str, ...] = ()) -> None:
        for key in [k for k in self._spares if k not in keep]:
            self._spares.pop(key).add_done_callback(_close_started)

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._close_session()
        task = self._choose(options)
        missing = task.missing_tools()
        if missing:
            raise SandboxUnavailableError(
                f"task {task.name!r} needs {', '.join(missing)}, which this machine lacks in "
                f"/usr (Debian: apt-get install {' '.join(missing)}; cc is in gcc)"
            )
        self.current = task
        self._episode = (seed, dict(options) if options else None, [])
        self._drop_spares(keep=("", str(task.tests_dir)))  # another task's grader goes
        session = self._take_session()
        self._prestart(task.tests_dir)
        try:
            archive = task.files_archive()
            if archive is not None:
                session.load(archive)
            setup = task.setup_script
            if setup is not None:
                status, output = session.execute(setup, timeout=120.0)
                if status != 0:
                    raise ConfigError(
                        f"task {task.name!r}: environment/setup.sh failed (status {status}): "
                        f"{output[-1000:]}"
                    )
        except BaseException:
            session.close()
            raise
        self._session = session
        self._turns = TurnCounter(task.max_turns or self.config.max_turns)
        self._used = 0.0
        self._busy = False
        self._done = False
        self._solution_sent = False
        self._expert_script = self._solution_action() if task.has_solution else None
        obs = f"{task.instruction}\n\n{_FORMAT}"
        return obs, {"task": task.name}

    def _choose(self, options: dict[str, Any] | None) -> TerminalTask:
        if options and "task" in options:
            for t in self.tasks:
                if t.name == options["task"]:
                    return t
            raise ConfigError(
                f"no task {options['task']!r} here; the tasks are: "
                f"{', '.join(t.name for t in self.tasks)}"
            )
        if options and "index" in options:
            index = options["index"]
            if isinstance(index, bool) or not isinstance(index, int):
                raise ConfigError(f"options['index'] must be an int, got {index!r}")
            return self.tasks[index % len(self.tasks)]
        if len(self.tasks) == 1:
            return self.tasks[0]
        return self.tasks[self.rng.randrange(len(self.tasks))]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._session is None or self.current is None:
            from gemgym.errors import ResetNeeded

            raise ResetNeeded("the episode is over (or never started); call reset() first")
        if self._episode is not None:
            self._episode[2].append(action)
        if isinstance(action, str):
            action = _encodable(action)
            self._solution_sent |= action == self._expert_script
        kind, payload = parse_action(action)
        self._turns.tick()
        if kind == "done":
            return self._grade("done")
        info: dict[str, Any] = {"action_type": kind}
        if not isinstance(action, str):
            info.update(non_text_info(action))
            obs = (
                f"Not text ({type(action).__name__}): reply with one shell command in a "
                "```bash block, or: done"
            )
            return self._after(obs, info)
        if kind == "empty":
            info["format_error"] = True
            obs = "Empty action: reply with one shell command in a ```bash block, or: done"
            return self._after(obs, info)
        if len(payload) > MAX_COMMAND_CHARS:
            info["format_error"] = True
            obs = (
                f"Command too long ({len(payload):,} characters; at most "
                f"{MAX_COMMAND_CHARS:,}): not run. Write long content with several commands."
            )
            return self._after(obs, info)
        started = time.monotonic()
        budget = self.config.episode_timeout - self._used
        timeout = max(0.1, min(self.config.command_timeout, budget))
        if kind == "keys" or self._busy:
            keys = payload if kind == "keys" else payload + "\\n"
            result = self._session.keys(keys, timeout=timeout)
            if kind == "command":
                info["typed_into_running_program"] = True
        else:
            result = self._session.run(payload, timeout=timeout)
        self._used += time.monotonic() - started
        self._busy = result.running
        notes = []
        if result.running:
            notes.append("[the program is still running: send <keys>...</keys> (^C stops it)]")
        elif result.killed_by == "timeout":
            notes.append(f"[stopped after {timeout:g} s (the command timeout); exit status 124]")
        elif result.killed_by == "output":
            notes.append("[stopped: the command printed too much; exit status 124]")
        elif result.exit_status is not None:
            notes.append(f"[exit status {result.exit_status}]")
        if result.shell_restarted:
            notes.append("[the shell exited; a new one was started in /app (variables were reset)]")
        obs = truncate_output(result.output, self.config.max_output_chars)
        if obs and not obs.endswith("\n"):
            obs += "\n"
        obs += "\n".join(notes)
        info.update(exit_status=result.exit_status, killed_by=result.killed_by)
        if self._used >= self.config.episode_timeout:
            obs += "\n[the episode's time budget is spent]"
            return self._grade("time", obs)
        return self._after(obs, info)

    def _after(
        self, obs: str, info: dict[str, Any]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._turns.reached:
            return self._grade("turns", obs, info)
        return obs, 0.0, False, False, info

    def _grade(
        self, why: str, obs: str = "", info: dict[str, Any] | None = None
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self._session is not None and self.current is not None
        info = dict(info or {})
        self._done = True
        archive = self._session.export()
        self._close_session()
        try:
            grader = self._take_session(self.current.tests_dir)
            self._prestart()  # the next episode's
            try:
                grader.load(archive)
                report = grader.run_tests(timeout=self.current.verifier_timeout)
            finally:
                grader.close()
        except SandboxError as e:  # not the model's doing: the grading itself failed
            raise GradingError(f"the tests of task {self.current.name!r} could not run: {e}") from e
        reward = 1.0 if report.all_passed else 0.0
        info.update(
            tests_passed=len(report.passed),
            tests_total=report.total,
            fraction_passed=report.fraction,
            test_failures=dict(report.failed),
            grading_error=report.error,
            ended_by=why,
        )
        verdict = f"[graded: {len(report.passed)}/{report.total} tests passed]"
        obs = f"{obs}\n{verdict}".lstrip("\n")
        if why == "done":
            return obs, reward, True, False, info
        if why == "turns":
            info["turn_limit"] = True
        return obs, reward, False, True, info

    # -- agents ----------------------------------------------------------------------------------
    def _solution_action(self) -> str:
        assert self.current is not None
        return (
            "```bash\nbash -c \"$(cat <<'__GEMGYM_SOLUTION__'\n"
            + self.current.solution.rstrip("\n")
            + '\n__GEMGYM_SOLUTION__\n)"\n```'
        )

    def expert_action(self) -> str:
        if self.current is None:
            raise ConfigError("call reset() before expert_action()")
        if self._busy:
            return "<keys>^C</keys>"
        if self._solution_sent:
            return "done"
        return self._solution_action()  # NotImplementedError: the task has no solve.sh

    def wrong_action(self) -> str:
        """The task's wrong solution as an action (``solution/wrong.sh``), for tests."""
        if self.current is None or self.current.wrong_solution is None:
            raise ConfigError("this task has no solution/wrong.sh (or reset() was not called)")
        return (
            "```bash\nbash -c \"$(cat <<'__GEMGYM_SOLUTION__'\n"
            + self.current.wrong_solution.rstrip("\n")
            + '\n__GEMGYM_SOLUTION__\n)"\n```'
        )

    def sample_random_action(self) -> str:
        command = _RANDOM_COMMANDS[self.rng.randrange(len(_RANDOM_COMMANDS))]
        return command if command == "done" else f"```bash\n{command}\n```"

    # -- copies ----------------------------------------------------------------------------------
    def __reduce__(self) -> tuple[Any, ...]:
        """A copy is a new env with the same settings, replaying this episode's actions."""
        episode = None if self._done or self._episode is None else self._episode
        return (_restore, (self.config, pickle.dumps(self._rng), episode))

    def spawn(self, same_state: bool = False) -> TerminalEnv:
        if same_state:
            copy: TerminalEnv = pickle.loads(pickle.dumps(self))
            return copy
        return _from_config(self.config)

    def get_state(self) -> Any:
        raise NotImplementedError(
            "a terminal env's state is a live sandbox; use spawn(same_state=True), which "
            "replays the episode's actions in a new one"
        )

    def close(self) -> None:
        """Close the episode's sandbox and every sandbox started ahead; one still starting is
        waited for, so that no sandbox outlives the env."""
        with self._spares_lock:
            self._closed = True
            spares, self._spares = list(self._spares.values()), {}
        for future in spares:
            if future.cancel():
                continue
            try:
                session = future.result(timeout=120)
            except Exception:  # it failed to start: nothing to close
                continue
            session.close()
        self._close_session()
        super().close()


def _from_config(config: TerminalConfig) -> TerminalEnv:
    return TerminalEnv(**{f.name: getattr(config, f.name) for f in fields(config)})


_PRESTARTER: list[ThreadPoolExecutor] = []
_PRESTARTER_LOCK = threading.Lock()


def _prestarter() -> ThreadPoolExecutor:
    """The threads that start sandboxes in the background (shared by every terminal env)."""
    with _PRESTARTER_LOCK:
        if not _PRESTARTER:
            _PRESTARTER[:] = [ThreadPoolExecutor(2, "gemgym-terminal-prestart")]
        return _PRESTARTER[0]


def _close_started(future: Future[Any]) -> None:
    """Close a sandbox started in the background that is no longer wanted."""
    if not future.cancel() and future.exception() is None:
        future.result().close()


def _reset_prestarter() -> None:  # a forked child must not wait on its parent's threads
    _PRESTARTER.clear()


os.register_at_fork(after_in_child=_reset_prestarter)


def _restore(
    config: TerminalConfig,
    rng: bytes,
    episode: tuple[int | None, dict[str, Any] | None, list[str]] | None,
) -> TerminalEnv:
    env = _from_config(config)
    if episode is not None:
        seed, options, actions = episode
        env.reset(seed=seed, options=options)
        for action in actions:
            env.step(action)
    env._rng = pickle.loads(rng)
    return env


for _name in shipped_task_names():
    register(
        f"terminal:{_name}",
        "gemgym.envs.terminal.env:TerminalEnv",
        kwargs={"task": _name},
        description=f"shell task {_name!r}: work in a sandboxed bash, graded by hidden tests",
    )
register(
    "terminal:dir",
    "gemgym.envs.terminal.env:TerminalEnv",
    description="a directory of Terminal-Bench-layout tasks (path=; default: the shipped ones)",
)
