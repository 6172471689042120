"""Terminal tasks on disk: :class:`TerminalTask` and :func:`load_tasks`.

A task is a directory in the Terminal-Bench layout (its 2.0 "harbor" form, with the 1.0 names
accepted too)::

    <task>/
      instruction.md        what the agent is told        (1.0: task.yaml, key "instruction")
      task.toml             optional: [metadata] category, difficulty, tags;
                            [agent] timeout_sec, max_turns; [verifier] timeout_sec;
                            [environment] requires (commands it needs, e.g. ["git"])
      environment/
        files/...           copied into the workspace (/app) before the episode
        setup.sh            then run there with bash, as the sandbox's user
        Dockerfile          used by a docker backend only
      solution/solve.sh     the reference solution, run in /app  (1.0: solution.sh)
      solution/wrong.sh     gemgym's addition: a plausible wrong solution the tests reject
      tests/test_*.py       hidden tests: functions test_*() with plain asserts, run in /app

See ``docs/terminal.md``.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, missing_dependency

__all__ = ["SHIPPED_TASKS", "TerminalTask", "load_task", "load_tasks", "shipped_task_names"]

SHIPPED_TASKS = Path(__file__).with_name("tasks")
"""The directory of the tasks shipped with gemgym."""
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class TerminalTask:
    """One task (see the module docstring).

    Attributes:
        name: the directory's name.
        path: the task directory.
        instruction: what the agent is told.
        metadata: ``task.toml``'s (or ``task.yaml``'s) other fields.
        agent_timeout: seconds of command time per episode, if the task sets it.
        max_turns: turns per episode, if the task sets it.
        verifier_timeout: seconds the tests may take.
        requires: commands the task needs from the host's ``/usr`` (``[environment]
            requires`` in ``task.toml``), beyond bash, coreutils, tar and python3.
    """

    name: str
    path: Path
    instruction: str
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_timeout: float | None = None
    max_turns: int | None = None
    verifier_timeout: float = 60.0
    requires: tuple[str, ...] = ()

    def missing_tools(self) -> list[str]:
        """The commands of :attr:`requires` this machine does not have."""
        return [t for t in self.requires if shutil.which(t, path=_SYSTEM_PATH) is None]

    @property
    def tests_dir(self) -> Path:
        """The hidden tests."""
        return self.path / "tests"

    def _script(self, *names: str) -> str | None:
        for name in names:
            p = self.path / name
            if p.is_file():
                return p.read_text(encoding="utf-8")
        return None

    @property
    def setup_script(self) -> str | None:
        """``environment/setup.sh``, if any."""
        return self._script("environment/setup.sh", "setup.sh")

    @property
    def has_solution(self) -> bool:
        """Whether the task ships a reference solution (``solution/solve.sh``).

        Only the expert (``--agent oracle``) needs one: benchmarks that keep their reference
        solutions hidden load, play and grade without it.
        """
        return self._script("solution/solve.sh", "solution.sh") is not None

    @property
    def solution(self) -> str:
        """The reference solution (a bash script).

        Raises:
            NotImplementedError: the task has none (the expert cannot play it).
        """
        found = self._script("solution/solve.sh", "solution.sh")
        if found is None:
            raise NotImplementedError(
                f"task {self.name!r} has no reference solution (solution/solve.sh), so the "
                "expert (OracleAgent) cannot play it; any other agent can"
            )
        return found

    @property
    def wrong_solution(self) -> str | None:
        """A plausible wrong solution the tests must reject, if the task has one."""
        return self._script("solution/wrong.sh", "wrong.sh")

    def files_archive(self) -> bytes | None:
        """``environment/files/`` as a tar archive (``None`` when the task has none)."""
        root = self.path / "environment" / "files"
        if not root.is_dir():
            return None
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for entry in sorted(root.rglob("*")):
                info = tar.gettarinfo(str(entry), str(entry.relative_to(root)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with entry.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        return buf.getvalue()


def _number(value: object, what: str, task: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"task {task!r}: {what} must be a positive number, got {value!r}")
    return float(value)


def load_task(path: str | os.PathLike[str]) -> TerminalTask:
    """Load one task directory.

    Raises:
        ConfigError: it is not a task directory (what is missing is named).
    """
    p = Path(path).resolve()
    name = p.name
    meta: dict[str, Any] = {}
    instruction = None
    if (p / "task.yaml").is_file():
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError as e:
            raise missing_dependency("PyYAML (to read task.yaml)", "terminal") from e
        loaded = yaml.safe_load((p / "task.yaml").read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"task {name!r}: task.yaml must hold a mapping")
        meta = dict(loaded)
        if isinstance(meta.get("instruction"), str):
            instruction = meta.pop("instruction")
    if (p / "task.toml").is_file():
        try:
            meta.update(tomllib.loads((p / "task.toml").read_text(encoding="utf-8")))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"task {name!r}: task.toml is not valid TOML ({e})") from e
    if (p / "instruction.md").is_file():
        instruction = (p / "instruction.md").read_text(encoding="utf-8")
    if not instruction:
        raise ConfigError(
            f"{str(p)!r} is not a terminal task: it needs instruction.md (or task.yaml with "
            "an 'instruction'), solution/solve.sh and tests/test_*.py"
        )
    if not (p / "tests").is_dir() or not any((p / "tests").glob("test*.py")):
        raise ConfigError(f"task {name!r} has no tests/test_*.py")
    agent = meta.get("agent", {}) if isinstance(meta.get("agent"), dict) else {}
    verifier = meta.get("verifier", {}) if isinstance(meta.get("verifier"), dict) else {}
    agent_timeout = _number(
        agent.get("timeout_sec", meta.get("max_agent_timeout_sec")), "agent timeout_sec", name
    )
    verifier_timeout = _number(
        verifier.get("timeout_sec", meta.get("max_test_timeout_sec")), "verifier timeout", name
    )
    environment = meta.get("environment", {}) if isinstance(meta.get("environment"), dict) else {}
    requires = environment.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ConfigError(f"task {name!r}: environment requires must be a list of command names")
    turns = agent.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise ConfigError(f"task {name!r}: agent max_turns must be a positive int, got {turns!r}")
    return TerminalTask(
        name=name,
        path=p,
        instruction=instruction.strip(),
        metadata=meta,
        agent_timeout=agent_timeout,
        max_turns=turns,
        verifier_timeout=verifier_timeout or 60.0,
        requires=tuple(requires),
    )


def _is_task(p: Path) -> bool:
    return (
        p.is_dir()
        and ((p / "instruction.md").is_file() or (p / "task.yaml").is_file())
        and (p / "tests").is_dir()
    )


def load_tasks(path: str | os.PathLike[str]) -> list[TerminalTask]:
    """The tasks in ``path``: a task directory, or a directory of task directories (sorted).

    Raises:
        ConfigError: ``path`` does not exist or holds no task.
    """
    p = Path(path).expanduser()
    if not p.is_dir():
        raise ConfigError(f"terminal task directory {str(p)!r} does not exist")
    if _is_task(p):
        return [load_task(p)]
    tasks = [load_task(d) for d in sorted(p.iterdir()) if _is_task(d)]
    if not tasks:
        raise ConfigError(
            f"{str(p)!r} holds no terminal task (a directory with instruction.md, "
            "solution/solve.sh and tests/test_*.py)"
        )
    return tasks


def shipped_task_names() -> list[str]:
    """The names of the shipped tasks (directory names; nothing is parsed)."""
    if not SHIPPED_TASKS.is_dir():
        return []
    return sorted(d.name for d in SHIPPED_TASKS.iterdir() if (d / "instruction.md").is_file())
