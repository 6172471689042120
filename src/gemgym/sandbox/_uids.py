"""A host uid of its own for each live sandbox (as root), from a range no account uses, locked
across processes (:func:`lease_uid`); re-exported by :mod:`gemgym.sandbox._host`."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import secrets
import stat
import tempfile
import threading
from pathlib import Path

from gemgym.errors import SandboxError

__all__ = ["UID_RANGE", "LeasedUid", "lease_uid", "user_process_count"]

UID_RANGE = range(2_000_000_000, 2_000_065_536)
"""Host uids leased to bubblewrap sandboxes when gemgym runs as root, one per live sandbox.

Above the ranges that systemd hands to containers (524288-1879048191) and below 2**31 (which
some tools mishandle); a uid that ``/etc/passwd`` or ``/etc/subuid`` names is skipped."""


class _UidLock:
    """The open, ``flock``-ed lock file of one leased uid (closed when released or collected)."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.lock = threading.Lock()

    def release(self) -> None:
        with self.lock:
            fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.release()


class LeasedUid(int):
    """A host uid held by one sandbox: its lock file stays locked until :meth:`release` (or
    until this object is garbage-collected, or the process exits)."""

    _lock: _UidLock

    def __new__(cls, value: int, fd: int) -> LeasedUid:
        self = super().__new__(cls, value)
        self._lock = _UidLock(fd)
        return self

    def release(self) -> None:
        """Give the uid back (idempotent); call it only once no process of the sandbox is left."""
        self._lock.release()

    @property
    def held(self) -> bool:
        """Whether this lease is still held."""
        return self._lock.fd is not None


_LOCK_DIRS = ("/run", "/var/run", "/var/lock", "/dev/shm", tempfile.gettempdir())


@functools.cache
def _uid_lock_dir() -> str:
    """A root-only directory for the uids' lock files (the same for every gemgym process)."""
    for base in _LOCK_DIRS:
        path = os.path.join(base, "gemgym-uids")
        with contextlib.suppress(OSError):
            os.mkdir(path, 0o700)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o077:
            return path
    raise SandboxError(
        "no root-only directory for the sandbox uids' lock files could be made in "
        f"{', '.join(_LOCK_DIRS)}; make /run/gemgym-uids (mode 0700, owned by root)"
    )


@functools.cache
def _named_uids() -> frozenset[int]:
    """Uids of ``/etc/passwd`` and the ranges of ``/etc/subuid`` inside :data:`UID_RANGE`."""
    named: set[int] = set()
    with contextlib.suppress(OSError):
        for line in Path("/etc/passwd").read_text(errors="replace").splitlines():
            parts = line.split(":")
            if len(parts) > 2 and parts[2].isdigit():
                named.add(int(parts[2]))
    with contextlib.suppress(OSError):
        for line in Path("/etc/subuid").read_text(errors="replace").splitlines():
            parts = line.split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start, count = int(parts[1]), int(parts[2])
                lo, hi = max(start, UID_RANGE.start), min(start + count, UID_RANGE.stop)
                named.update(range(lo, hi))
    return frozenset(u for u in named if u in UID_RANGE)


def lease_uid() -> LeasedUid:
    """A host uid that no other live sandbox (of any gemgym process on this machine) holds.

    Needs root. Each uid in :data:`UID_RANGE` has a lock file in a root-only directory; the
    uid is held while its file is ``flock``-ed (the lock goes with the process, so a crashed
    process frees its uids) and is only taken when no process runs as it.

    Raises:
        SandboxError: every uid of the range is taken.
    """
    folder = _uid_lock_dir()
    named = _named_uids()
    size = len(UID_RANGE)
    start = secrets.randbelow(size)
    for i in range(size):
        uid = UID_RANGE[(start + i) % size]
        if uid in named:
            continue
        fd = os.open(
            os.path.join(folder, str(uid)),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if user_process_count(uid, zombies=True):
            os.close(fd)  # a process of an earlier holder is still dying
            continue
        return LeasedUid(uid, fd)
    raise SandboxError(f"all {size} sandbox uids are in use; close sandboxes you no longer need")


def user_process_count(uid: int, zombies: bool = False) -> int:
    """How many live processes ``uid`` has now (``RLIMIT_NPROC`` counts them all).

    Zombies are left out unless ``zombies``: they are about to be reaped, and counting them would
    let a run started just before that fork more than its limit once they are gone.
    """
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if zombies or state not in (b"Z", b"X"):
                count += 1
    return count
