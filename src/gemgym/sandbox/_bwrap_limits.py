"""How a bubblewrap sandbox's processes and memory are capped, and the host uid it runs as
(split from :mod:`gemgym.sandbox.bwrap`, which re-exports every name)."""

from __future__ import annotations

import functools
import os
from typing import Literal

from gemgym.errors import ConfigError, SandboxUnavailableError
from gemgym.sandbox._host import (
    MEMORY_HEADROOM,
    NOBODY,
    LeasedUid,
    SandboxCgroup,
    default_open_files,
    lease_uid,
    user_process_count,
)
from gemgym.sandbox.base import (
    Limits,
    MemoryScope,
)

ProcessLimitMode = Literal["auto", "cgroup", "uid"]
"""How process counts are capped (see the module docstring)."""


class SandboxFallbackWarning(UserWarning):
    """A sandbox runs with less than was asked for, because the user opted in to it."""


# -- processes, memory and uids --------------------------------------------------------------------


@functools.cache
def _nproc_per_namespace() -> bool:
    """Whether this kernel counts ``RLIMIT_NPROC`` per user namespace (Linux 5.14 and later)."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def _required_scope(limits: Limits) -> MemoryScope | None:
    """The memory scope ``limits`` insists on (``None``: per-process is accepted)."""
    if limits.memory_scope == "sandbox":
        return "sandbox"
    if limits.memory_scope == "auto" and os.geteuid() == 0:
        return "sandbox"
    return None


class ProcessLimiter:
    """Chooses the host uid a sandbox runs as and how its processes and memory are capped.

    As root, each sandbox runs as a host uid of its own (:func:`~gemgym.sandbox._host.lease_uid`,
    never host uid 0), so per-user kernel limits (inotify instances, pipe buffers, processes)
    are not shared between sandboxes; ``"cgroup"`` (the default where possible) gives each its
    own ``pids`` and ``memory`` cgroups, ``"uid"`` caps processes with ``RLIMIT_NPROC`` on its
    uid instead (and has no memory cgroup: it needs ``Limits(memory_scope="process")``). Not as
    root, sandboxes run as this uid with ``RLIMIT_NPROC`` (``"uid"``), sharing its per-user
    limits with each other and with the user's own processes.
    """

    def __init__(self, mode: ProcessLimitMode) -> None:
        if mode not in ("auto", "cgroup", "uid"):
            raise ConfigError(f"process_limit must be 'auto', 'cgroup' or 'uid', got {mode!r}")
        if mode == "auto":
            mode = "cgroup" if SandboxCgroup.usable() else "uid"
        if mode == "cgroup" and not SandboxCgroup.usable():
            raise SandboxUnavailableError(
                "pids cgroups need root and a writable /sys/fs/cgroup; use "
                "process_limit='uid' (RLIMIT_NPROC on the sandbox's uid)"
            )
        self.mode = mode
        self.dropping = os.geteuid() == 0
        self._user: LeasedUid | None = None

    @property
    def user(self) -> int | None:
        """The host uid of this limiter's one sandbox (a shell session), leased on first use and
        held by the :class:`~gemgym.sandbox._host.ServerProcess` started with it; ``None`` when
        not root (the sandbox keeps this uid)."""
        if not self.dropping:
            return None
        if self._user is None or not self._user.held:
            self._user = lease_uid()
        return self._user

    def lease(self) -> int | None:
        """A fresh host uid for one more sandbox (``None`` when not root)."""
        return lease_uid() if self.dropping else None

    def probe_user(self) -> int | None:
        """A uid to check bubblewrap with (any unprivileged one: the result is the same)."""
        return NOBODY if self.dropping else None

    def nproc(self, max_processes: int, uid: int | None = None) -> int | None:
        """The ``RLIMIT_NPROC`` to set, or ``None`` (a pids cgroup limits processes).

        Since Linux 5.14 the kernel counts it per user namespace: only the sandbox's own
        processes count, so it is the limit plus the server and the test process. Before,
        it counted every process of the uid on the machine, taken when the run starts.
        """
        if self.mode == "cgroup":
            return None
        if _nproc_per_namespace():
            return max_processes + 2
        if uid is None:
            uid = self.user if self.dropping else os.getuid()
        assert uid is not None
        return user_process_count(uid) + max_processes

    def check(self, limits: Limits) -> None:
        """Raise now if the memory limit cannot be enforced as ``limits`` asks.

        Raises:
            ConfigError: ``process_limit="uid"`` (no memory cgroup) with a whole-sandbox scope.
            SandboxUnavailableError: no memory cgroup can be made here for a whole-sandbox scope.
        """
        need = _required_scope(limits)
        if need is None:
            return
        hint = "or pass Limits(memory_scope='process') to accept a limit per process"
        if not self.dropping:
            raise SandboxUnavailableError(
                "a memory limit for the whole sandbox (Limits(memory_scope='sandbox')) needs a "
                f"memory cgroup, which gemgym can only make as root; run as root, {hint}"
            )
        if self.mode != "cgroup":
            raise ConfigError(
                "process_limit='uid' makes no memory cgroup, so Limits.memory could only hold "
                f"per process; use process_limit='cgroup' (or 'auto'), {hint}"
            )
        if not SandboxCgroup.memory_usable():
            raise SandboxUnavailableError(
                "no memory cgroup can be made here (cgroup v1 without the memory hierarchy, or a "
                "cgroup v2 hierarchy not delegated to gemgym), so Limits.memory cannot hold for "
                f"the whole sandbox; enable the memory controller, {hint}"
            )

    def cgroup(self, limits: Limits) -> SandboxCgroup | None:
        """Fresh cgroups for one sandbox (``None`` when limiting by uid).

        Raises:
            ConfigError, SandboxUnavailableError: see :meth:`check`.
        """
        self.check(limits)
        if self.mode != "cgroup":
            return None
        cgroup = SandboxCgroup(limits.max_processes + 3, int(limits.memory) + MEMORY_HEADROOM)
        if _required_scope(limits) == "sandbox" and cgroup.memory_scope != "sandbox":
            cgroup.remove()
            raise SandboxUnavailableError(
                "the sandbox's memory cgroup could not be made, so Limits.memory cannot hold "
                "for the whole sandbox; pass Limits(memory_scope='process') to accept a limit "
                "per process"
            )
        return cgroup


def open_files(limits: Limits) -> int:
    """The ``RLIMIT_NOFILE`` of each process of a sandbox under ``limits``."""
    if limits.max_open_files is not None:
        return int(limits.max_open_files)
    return default_open_files(limits.max_processes)
