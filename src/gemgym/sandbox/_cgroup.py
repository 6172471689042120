"""The ``pids`` and ``memory`` cgroups (v1 or v2) of one sandbox (:class:`SandboxCgroup`);
re-exported by :mod:`gemgym.sandbox._host`."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from pathlib import Path

from gemgym.sandbox.base import MemoryScope

__all__ = ["MEMORY_HEADROOM", "SandboxCgroup"]

_CGROUP_FS = Path("/sys/fs/cgroup")
MEMORY_HEADROOM = 96 << 20
"""Memory a sandbox's cgroup allows beyond ``Limits.memory``: its server and test process."""


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller (and ``""`` for the v2 hierarchy)."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            found[c] = path
    return found


class SandboxCgroup:
    """The cgroups of one sandbox: a ``pids`` limit, and a ``memory`` limit where possible.

    As root, each sandbox gets its own cgroup in the ``pids`` and ``memory`` hierarchies (cgroup
    v1), or one cgroup with both controllers (v2), created *below this process's own cgroup* (so
    the machine's limits still apply) in a ``gemgym`` directory, and removed by :meth:`remove`;
    cgroups left by dead processes are swept when a new one is made. The memory limit covers
    every process of the sandbox together (plus :data:`MEMORY_HEADROOM` for the server and the
    test process), including ``tmpfs`` files; ``RLIMIT_AS`` alone is per process.
    """

    _counter = itertools.count()

    def __init__(self, max_pids: int, memory: int | None) -> None:
        self.dirs: list[Path] = []
        self.pids_dir: Path | None = None
        self.memory_dir: Path | None = None
        self.v2 = (_CGROUP_FS / "cgroup.controllers").exists()
        name = f"{os.getpid()}-{next(self._counter)}"
        own = _own_cgroups()
        try:
            if self.v2:
                self._make_v2(own.get("", "/"), name, max_pids, memory)
            else:
                self._make_v1(own, name, max_pids, memory)
        except OSError:
            self.remove()
            raise

    def _base(self, root: Path, own: str) -> Path:
        base = root / own.lstrip("/") / "gemgym"
        base.mkdir(exist_ok=True)
        for d in base.iterdir():  # cgroups of processes that died without removing theirs
            owner = d.name.split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    d.rmdir()
        return base

    def _make_v1(self, own: dict[str, str], name: str, max_pids: int, memory: int | None) -> None:
        pids = self._base(_CGROUP_FS / "pids", own.get("pids", "/")) / name
        pids.mkdir()
        self.dirs.append(pids)
        self.pids_dir = pids
        (pids / "pids.max").write_text(str(int(max_pids)))
        if memory is None or not (_CGROUP_FS / "memory").is_dir():
            return
        try:
            mem = self._base(_CGROUP_FS / "memory", own.get("memory", "/")) / name
            mem.mkdir()
        except OSError:
            return  # no memory cgroup: the run says so (memory_scope == "process")
        self.dirs.append(mem)
        (mem / "memory.limit_in_bytes").write_text(str(int(memory)))
        with contextlib.suppress(OSError):  # no swap accounting on this kernel
            (mem / "memory.memsw.limit_in_bytes").write_text(str(int(memory)))
        self.memory_dir = mem

    def _make_v2(self, own: str, name: str, max_pids: int, memory: int | None) -> None:
        parent = _CGROUP_FS / own.lstrip("/")
        with contextlib.suppress(OSError):  # refused when this cgroup holds processes itself
            (parent / "cgroup.subtree_control").write_text("+pids +memory")
        base = self._base(_CGROUP_FS, own)
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text("+pids +memory")
        path = base / name
        path.mkdir()
        self.dirs.append(path)
        (path / "pids.max").write_text(str(int(max_pids)))
        self.pids_dir = path
        if memory is not None and (path / "memory.max").exists():
            (path / "memory.max").write_text(str(int(memory)))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            self.memory_dir = path

    @classmethod
    @functools.cache
    def usable(cls) -> bool:
        """Whether this process can create the ``pids`` cgroups (root, a writable hierarchy)."""
        if os.geteuid() != 0:
            return False
        try:
            probe = cls(8, None)
        except OSError:
            return False
        probe.remove()
        return True

    @classmethod
    @functools.cache
    def memory_usable(cls) -> bool:
        """Whether this process can also create ``memory`` cgroups (the whole-sandbox limit)."""
        if not cls.usable():
            return False
        try:
            probe = cls(8, 64 << 20)
        except OSError:
            return False
        usable = probe.memory_dir is not None
        probe.remove()
        return usable

    @property
    def memory_scope(self) -> MemoryScope:
        """``"sandbox"`` when a memory cgroup limits the whole sandbox, else ``"process"``."""
        return "sandbox" if self.memory_dir is not None else "process"

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join these cgroups."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs)]

    def _counter_value(self, path: Path | None, filename: str, key: str) -> int:
        if path is None:
            return 0
        try:
            for line in (path / filename).read_text().splitlines():
                k, _, value = line.partition(" ")
                if k == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def limit_hits(self) -> int:
        """How many forks the process limit refused so far."""
        return self._counter_value(self.pids_dir, "pids.events", "max")

    def oom_kills(self) -> int:
        """How many processes the memory limit killed so far."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        return self._counter_value(self.memory_dir, name, "oom_kill")

    def tasks(self) -> list[int]:
        """The threads in the sandbox now."""
        if self.pids_dir is None:
            return []
        name = "cgroup.threads" if self.v2 else "tasks"
        try:
            return [int(p) for p in (self.pids_dir / name).read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        """Kill what is left in the cgroups and delete them."""
        for d in reversed(self.dirs):
            for _ in range(200):
                with contextlib.suppress(OSError):
                    if (d / "cgroup.kill").exists():
                        (d / "cgroup.kill").write_text("1")
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)
        self.dirs = []
