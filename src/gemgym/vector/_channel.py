"""Message channels between the ``process`` backend's parent and one worker.

Two kinds, with one interface (``send(bytes)``, ``recv(timeout) -> bytes | None``, ``close()``):

* :class:`PipeChannel`: every message goes through the worker's pipe (a
  :class:`multiprocessing.connection.Connection`); the waiting side polls the pipe for a while
  before it sleeps on it (:class:`BusyWait`).
* :class:`SharedMemoryChannel`: messages go through a shared memory file, one region per
  direction, each with a sequence number that the waiting side polls. No system call sits on the
  path of a message: a pipe round trip can cost as much as a batch of eight µs-cheap game steps
  (measured figures: docs/benchmarks.md). The pipe is still there, for three things: waking a side
  that stopped polling and sleeps on it, messages larger than a region, and noticing that the
  other side died (its end of the pipe closes).

The shared memory channel relies on x86's memory order (a store is seen by another core after
the stores that precede it, and the loads of one core are not reordered), so
:func:`shared_memory_supported` says where it may be used; elsewhere the pipe channel is used.

Layout of the shared file (8-byte words, then the two regions)::

    word 0  sequence number of the last message parent -> worker
    word 1  its length in bytes (more than the region's capacity: the message is on the pipe)
    word 2  sequence number of the last message worker -> parent
    word 3  its length
    word 4  1 while the worker sleeps on the pipe
    word 5  1 while the parent sleeps on the pipe
    64 ...  region parent -> worker, then region worker -> parent (``capacity`` bytes each)
"""

from __future__ import annotations

import collections
import mmap
import os
import platform
import select
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

__all__ = [
    "BusyWait",
    "PipeChannel",
    "SharedMemoryChannel",
    "create_shared_file",
    "shared_memory_supported",
]

_HEADER = 64
_WORDS = 6
# A full memory barrier on x86: taking and releasing a lock is a locked (fencing) instruction.
# Needed between "I sleep" and "has a message come?" on one side and "here is a message" and
# "does the other side sleep?" on the other, so that one of the two always sees the other.
_BARRIER = threading.Lock()
# A side that sleeps on the pipe checks the sequence number again this often, however sure the
# barrier above makes a lost wake-up impossible.
_RECHECK_S = 0.05


def shared_memory_supported() -> bool:
    """Whether :class:`SharedMemoryChannel` is safe here: Linux on x86 (its memory order)."""
    machine = platform.machine().lower()
    return sys.platform.startswith("linux") and machine in {"x86_64", "amd64", "i386", "i686"}


def _fence() -> None:
    _BARRIER.acquire()
    _BARRIER.release()


class BusyWait:
    """Wait for a pipe to become readable, polling it for a while before sleeping.

    Waking a process that sleeps on a pipe costs tens of µs on a virtual machine: more than a
    whole batch of a µs-cheap env. So the side that waits (a worker for its next batch, the
    parent for a reply) first polls the pipe for up to ``spin_s`` seconds, yielding its core
    between polls (``sched_yield``) so that it never holds up a process with work to do. It
    polls only while waits are short: after a wait that outlasted ``spin_s`` (slow envs, or a
    parent busy elsewhere, e.g. generating with a model) the next one sleeps at once, and a
    short wait turns polling back on. ``spin_s=0`` never polls.
    """

    def __init__(self, conn: Connection, spin_s: float) -> None:
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        self.spin_s = spin_s
        self.spin = spin_s > 0

    def wait(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: for ever); ``True`` once readable (data,
        or the other end closed)."""
        poll, now = self._poll.poll, time.perf_counter
        t0 = now()
        ready = bool(poll(0))
        if not ready and self.spin:
            end = t0 + (self.spin_s if timeout is None else min(self.spin_s, timeout))
            while not ready and now() < end:
                os.sched_yield()
                ready = bool(poll(0))
        if not ready:
            left = None if timeout is None else max(0.0, timeout - (now() - t0)) * 1000
            ready = bool(poll(left))
        self.spin = ready and now() - t0 < self.spin_s
        return ready


class PipeChannel:
    """Messages over the pipe alone, polled for up to ``spin_s`` before sleeping."""

    def __init__(self, conn: Connection, spin_s: float) -> None:
        self.conn = conn
        self._wait = BusyWait(conn, spin_s)

    def send(self, data: bytes) -> None:
        self.conn.send_bytes(data)

    def recv(self, timeout: float | None) -> bytes | None:
        """The next message; ``None`` if none came within ``timeout`` seconds (``None``: wait
        for ever). Raises ``EOFError`` or ``OSError`` once the other side is gone."""
        if not self._wait.wait(timeout):
            return None
        return self.conn.recv_bytes()

    def close(self) -> None:
        self.conn.close()


def create_shared_file(capacity: int) -> str:
    """A new zero-filled file for a :class:`SharedMemoryChannel` (in ``/dev/shm`` if present);
    the caller removes it once both sides have mapped it.

    The space is reserved at once, so a full ``/dev/shm`` (64 MB in a default Docker container)
    raises ``OSError`` here instead of killing a process with ``SIGBUS`` later, when a message
    first touches a page that is not there."""
    where = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, path = tempfile.mkstemp(prefix="gemgym-vec-", dir=where)
    try:
        os.posix_fallocate(fd, 0, _HEADER + 2 * capacity)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return path


class SharedMemoryChannel:
    """Messages through a shared file's two regions; the pipe for wake-ups and big messages.

    Args:
        conn: this side's end of the worker's pipe.
        path: the file made by :func:`create_shared_file` (same ``capacity``).
        capacity: bytes per region; a larger message goes through the pipe.
        parent: ``True`` on the parent's side, ``False`` on the worker's.
        spin_s: seconds a waiting side polls before it sleeps on the pipe (adaptive, as
            :class:`BusyWait`).
    """

    def __init__(
        self, conn: Connection, path: str, capacity: int, parent: bool, spin_s: float
    ) -> None:
        self.conn = conn
        self.capacity = capacity
        fd = os.open(path, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, _HEADER + 2 * capacity)
        finally:
            os.close(fd)
        self._words = memoryview(self._mm)[: _WORDS * 8].cast("Q")
        first, second = _HEADER, _HEADER + capacity
        # (sequence word, length word, data offset) of what this side sends, and receives
        self._out = (0, 1, first) if parent else (2, 3, second)
        self._in = (2, 3, second) if parent else (0, 1, first)
        self._my_sleep, self._peer_sleep = (5, 4) if parent else (4, 5)
        self._sent = self._got = 0  # the file starts zero-filled: no message yet either way
        self._stash: collections.deque[bytes] = collections.deque()  # big messages read early
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        self.spin_s = spin_s
        self.spin = spin_s > 0

    def send(self, data: bytes) -> None:
        words = self._words
        seq_w, len_w, off = self._out
        n = len(data)
        if n <= self.capacity:
            self._mm[off : off + n] = data
        else:
            self.conn.send_bytes(data)
        words[len_w] = n
        self._sent += 1
        words[seq_w] = self._sent  # published after the data (x86 keeps stores in order)
        _fence()
        if words[self._peer_sleep]:
            self.conn.send_bytes(b"")  # wake it

    def recv(self, timeout: float | None) -> bytes | None:
        """The next message; ``None`` if none came within ``timeout`` seconds (``None``: wait
        for ever). Raises ``EOFError`` or ``OSError`` once the other side is gone."""
        words, seq_w = self._words, self._in[0]
        want = self._got + 1
        if words[seq_w] != want:
            if not self._wait(want, timeout):
                return None
        else:
            self.spin = self.spin_s > 0
        self._got = want
        n = words[self._in[1]]
        if n > self.capacity:
            return self._big()
        off = self._in[2]
        return self._mm[off : off + n]

    def _wait(self, want: int, timeout: float | None) -> bool:
        words, seq_w, now = self._words, self._in[0], time.perf_counter
        t0 = now()
        if self.spin:
            end = t0 + (self.spin_s if timeout is None else min(self.spin_s, timeout))
            yield_ = os.sched_yield
            while now() < end:
                yield_()
                if words[seq_w] == want:
                    self.spin = True
                    return True
        words[self._my_sleep] = 1
        try:
            _fence()
            while words[seq_w] != want:
                left = _RECHECK_S if timeout is None else timeout - (now() - t0)
                if left <= 0:
                    return False
                if self._poll.poll(min(left, _RECHECK_S) * 1000):
                    msg = self.conn.recv_bytes()  # EOFError once the other side is gone
                    if msg:
                        self._stash.append(msg)
        finally:
            words[self._my_sleep] = 0
        self.spin = self.spin_s > 0 and now() - t0 < self.spin_s
        return True

    def _big(self) -> bytes:
        if self._stash:
            return self._stash.popleft()
        while True:
            msg = self.conn.recv_bytes()
            if msg:
                return msg

    def close(self) -> None:
        self._words.release()
        self._mm.close()
        self.conn.close()
