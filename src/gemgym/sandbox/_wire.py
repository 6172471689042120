"""The wire format between the host, the fork-server and the processes of a run (standard library
only, no gemgym imports).

Its source text is put in front of :mod:`gemgym.sandbox._runner`'s when that is passed to the
sandboxed interpreter; the host imports it as a module. Length-prefixed JSON messages
(:func:`send_message`, :func:`recv_message`), the plain-value codec between the program and the
trusted test process (:func:`encode_value`, :func:`decode_value`), and :func:`pump`, which feeds a
process's stdin and collects its output under a deadline and an output cap.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import time
from collections.abc import Callable
from typing import Any

KILL_TIMEOUT = "timeout"
KILL_OUTPUT = "output"
KILL_FILES = "open_files"
ACK = b"R"
"""Written by the server as soon as it has read a request (before anything of it runs)."""
MAX_MESSAGE = 64 << 20
"""Largest message between the program and the test process."""
MAX_DEPTH = 200
"""Deepest nesting of a value sent between them."""


# -- plain values --------------------------------------------------------------------------------

_SCALARS = (type(None), bool, int, float, str)


def encode_value(value: Any, refs: Callable[[Any], int] | None = None, depth: int = 0) -> Any:
    """``value`` as JSON data, for plain built-in values only (exact types, no subclasses).

    Anything else becomes ``{"r": id}`` through ``refs`` (an object kept on the sending side),
    or raises :class:`TypeError` when ``refs`` is ``None``.
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(value)
    if kind in _SCALARS:
        if kind is int and (value > 1 << 62 or value < -(1 << 62)):
            return {"i": str(value)}
        return value
    if kind is list:
        return [encode_value(v, refs, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode_value(v, refs, depth + 1) for v in value]}
    if kind is dict:
        return {
            "d": [
                [encode_value(k, refs, depth + 1), encode_value(v, refs, depth + 1)]
                for k, v in value.items()
            ]
        }
    if kind is set:
        return {"s": [encode_value(v, refs, depth + 1) for v in value]}
    if kind is frozenset:
        return {"f": [encode_value(v, refs, depth + 1) for v in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if refs is None:
        raise TypeError(f"a {kind.__name__} is not a plain value")
    return {"r": refs(value)}


def decode_value(data: Any, refs: Callable[[int], Any] | None = None, depth: int = 0) -> Any:
    """Rebuild a value encoded by :func:`encode_value` from JSON data (untrusted input).

    Only plain built-in objects come out (and what ``refs`` makes of ``{"r": id}``).

    Raises:
        ValueError: the data is not a valid encoding.
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(data)
    if kind in _SCALARS:
        return data
    if kind is list:
        return [decode_value(v, refs, depth + 1) for v in data]
    if kind is not dict or len(data) != 1:
        raise ValueError("not an encoded value")
    ((tag, body),) = data.items()
    if tag == "i" and type(body) is str:
        return int(body)
    if tag in ("t", "s", "f", "d", "c") and type(body) is not list:
        raise ValueError("not an encoded value")
    try:
        if tag == "t":
            return tuple(decode_value(v, refs, depth + 1) for v in body)
        if tag == "s":
            return {decode_value(v, refs, depth + 1) for v in body}
        if tag == "f":
            return frozenset(decode_value(v, refs, depth + 1) for v in body)
        if tag == "d":
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("not an encoded value")
                out[decode_value(pair[0], refs, depth + 1)] = decode_value(pair[1], refs, depth + 1)
            return out
    except TypeError as e:  # an unhashable key or member
        raise ValueError(str(e)) from None
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "c" and len(body) == 2 and all(type(x) in (int, float) for x in body):
        return complex(body[0], body[1])
    if tag == "r" and type(body) is int and refs is not None:
        return refs(body)
    raise ValueError("not an encoded value")


def send_message(fd: int, message: dict[str, Any]) -> None:
    """Write a length-prefixed JSON message."""
    body = json.dumps(message).encode()
    write_all(fd, len(body).to_bytes(4, "big") + body)


def recv_message(fd: int, limit: int = MAX_MESSAGE) -> dict[str, Any]:
    """Read a length-prefixed JSON message (``EOFError`` when the stream closed)."""
    size = int.from_bytes(_read_exact(fd, 4), "big")
    if size > limit:
        raise ValueError(f"message of {size} bytes (limit {limit})")
    message = json.loads(_read_exact(fd, size))
    if type(message) is not dict:
        raise ValueError("not a message")
    return message


# -- i/o -----------------------------------------------------------------------------------------


# -- the open-files watchdog ----------------------------------------------------------------------

WATCH_TICK = 0.01
"""Seconds between two looks at the host's open files while a run's processes live."""
_FILES_UNLIMITED = 1 << 62
_FILE_MAX: list[int | None] = []


_FILE_NR: list[int] = []
"""A descriptor of ``/proc/sys/fs/file-nr``, opened once: read at every run's start, where an
``open`` would look the path up on caches the run's exit left cold."""


def _file_nr() -> int:
    """The host's allocated ``struct file`` count (``/proc/sys/fs/file-nr``'s first field)."""
    if not _FILE_NR:
        _FILE_NR.append(os.open("/proc/sys/fs/file-nr", os.O_RDONLY | os.O_CLOEXEC))
    return int(os.pread(_FILE_NR[0], 64, 0).split()[0])


def files_limit() -> int | None:
    """Open files one sandbox may hold, descriptors and file mappings together: 0.5 % of the
    host's ``fs.file-max`` (read once); ``None`` where it is effectively unlimited (2**62 or
    more, systemd's default) or cannot be read (no watchdog then)."""
    if not _FILE_MAX:
        try:
            with open("/proc/sys/fs/file-max", encoding="ascii") as f:
                file_max = int(f.read().split()[0])
            _file_nr()
        except (OSError, ValueError, IndexError):
            file_max = _FILES_UNLIMITED
        _FILE_MAX.append(None if file_max >= _FILES_UNLIMITED else max(1, file_max // 200))
    return _FILE_MAX[0]


def _exited(pid: str) -> bool:
    """Whether ``pid`` has exited or is exiting (its files are being closed), or is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & 4)  # PF_EXITING
    except (OSError, IndexError, ValueError):
        return True


class FileWatch:
    """Bounds the ``struct file`` objects a run holds, descriptors and file mappings alike (a
    mapping keeps its file after ``close``; no cgroup or rlimit counts those).

    Called every :data:`WATCH_TICK` while the run lives, it reads the host's allocated-file
    count (one small read); only when that rose by more than :func:`files_limit` since the
    baseline (taken when the run starts, moved down when the host frees files) does it count
    the run's own: for every process of the sandbox's PID namespace but ``exclude`` (the
    server, a trusted test process), the entries of ``/proc/PID/fd`` and ``/proc/PID/map_files``
    (one per file-backed mapping: an over-count of distinct files, never an under-count). Over
    the limit, or a process of the run whose files cannot be read (it made itself not dumpable)
    while the host rose: the run is to be killed, and :attr:`message` says why. Otherwise the
    rise was someone else's, and the baseline moves up to the host's count less the run's.
    """

    def __init__(self, limit: int, exclude: list[int], leader: int | None) -> None:
        self.limit = limit
        self.exclude = exclude
        self.leader = leader
        self.message = ""
        self.baseline = _file_nr()

    @classmethod
    def start(cls, exclude: list[int], leader: int | None = None) -> FileWatch | None:
        """A watch from now on, or ``None`` where there is no limit to keep.

        Only for PID 1 of the sandbox, whose ``kill(-1, ...)`` reaches every other process of
        it: the run's processes are stopped while they are counted (milliseconds per 10,000
        files), so that they make no more meanwhile, and continued if they may go on. A
        ``leader`` (a job-control shell) is stopped before the others and continued after
        them, so that it never sees its jobs stopped (they read as continued, if at all).
        """
        limit = files_limit()
        if limit is None:
            return None
        try:
            return cls(limit, exclude, leader)
        except (OSError, ValueError, IndexError):
            return None

    def _stop(self) -> None:
        leader = self.leader
        if leader is not None:
            with contextlib.suppress(OSError):
                os.kill(leader, signal.SIGSTOP)
                for _ in range(200):  # until it is stopped (microseconds), 20 ms at most
                    with open(f"/proc/{leader}/stat", "rb") as f:
                        if f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"Z", b"X"):
                            break
                    time.sleep(0.0001)
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGSTOP)

    def _continue(self) -> None:
        if self.leader is None:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGCONT)
            return
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in (*self.exclude, self.leader):
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGCONT)
        with contextlib.suppress(OSError):
            os.kill(self.leader, signal.SIGCONT)

    def run_files(self) -> tuple[int, int]:
        """The files the run's processes hold, and how many of them hide theirs."""
        held = hidden = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in self.exclude:
                continue
            for what in ("fd", "map_files"):
                try:
                    held += len(os.listdir(f"/proc/{entry}/{what}"))
                except PermissionError:  # not dumpable, or exited (its files are closed)
                    hidden += not _exited(entry)
                    break
                except OSError:  # it is gone
                    break
        return held, hidden

    def __call__(self) -> bool:
        """Look once; true when the run must be killed (then :attr:`message` says why)."""
        try:
            now = _file_nr()
        except (OSError, ValueError, IndexError):
            return False
        if now < self.baseline:
            self.baseline = now
        if now - self.baseline <= self.limit:
            return False
        self._stop()
        held, hidden = self.run_files()
        if held > self.limit:
            self.message = (
                f"open files limit: {held:,} files held (descriptors and mappings), the limit is "
                f"{self.limit:,} (0.5 % of the host's fs.file-max)"
            )
            return True
        if hidden:
            self.message = (
                f"open files limit: {hidden} process(es) of the run hide their open files (not "
                f"dumpable) while the host's open files rose by {now - self.baseline:,}, more "
                f"than the limit of {self.limit:,} (0.5 % of the host's fs.file-max)"
            )
            return True
        self._continue()
        self.baseline = now - held
        return False


def pump(
    stdin_fd: int | None,
    data: bytes,
    out_fds: list[int],
    deadline: float,
    max_output: int,
    kill: Callable[[], None],
    exit_fds: list[int] = (),  # type: ignore[assignment]
    watch: Callable[[], bool] | None = None,
) -> tuple[list[bytes], str | None]:
    """Feed ``data`` to ``stdin_fd`` and read ``out_fds`` until they close.

    With ``exit_fds`` (pidfds of the processes), stops once all of them have exited and what
    they wrote is drained, even when a background process still holds the pipes open. Stops
    early (calling ``kill``) at ``deadline`` (``time.monotonic()``) or once more than
    ``max_output`` bytes were read in total. Returns the bytes read per fd (capped at
    ``max_output`` in total) and ``"timeout"``, ``"output"`` or ``None``. Closes every fd given
    except the ``exit_fds``. With ``watch`` (a :class:`FileWatch`), it is called every
    :data:`WATCH_TICK` while the processes live; when it returns true the processes are killed
    and the reason is ``"open_files"``.
    """
    sel = selectors.DefaultSelector()
    bufs: dict[int, list[bytes]] = {fd: [] for fd in out_fds}
    for fd in out_fds:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    view = memoryview(data)
    if stdin_fd is not None:
        if data:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            os.close(stdin_fd)
            stdin_fd = None
    running = set(exit_fds)
    for fd in running:
        sel.register(fd, selectors.EVENT_READ)
    exited = not running
    total = 0
    reason: str | None = None
    open_reads = len(out_fds)
    next_look = time.monotonic() + WATCH_TICK if watch is not None else deadline
    while open_reads:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            reason = KILL_TIMEOUT
            break
        if watch is not None and now >= next_look:
            if watch():
                reason = KILL_FILES
                break
            next_look = now + WATCH_TICK
        wait = min(left, 1.0, next_look - now) if watch is not None else min(left, 1.0)
        events = sel.select(0 if exited and exit_fds else wait)
        if exited and exit_fds and not any(int(k.fd) in bufs for k, _ in events):
            break  # the processes are gone and their output is drained
        for key, _ in events:
            fd = int(key.fd)
            if fd in running:
                sel.unregister(fd)
                running.discard(fd)
                exited = not running
                continue
            if fd == stdin_fd:
                try:
                    n = os.write(fd, view[:65536])
                except BlockingIOError:
                    n = 0
                except BrokenPipeError:  # the snippet stopped reading: drop the rest
                    n = len(view)
                view = view[n:]
                if not view:
                    sel.unregister(fd)
                    os.close(fd)
                    stdin_fd = None
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                open_reads -= 1
                continue
            room = max_output - total
            bufs[fd].append(chunk[:room])
            total += len(chunk)
            if total > max_output:
                reason = KILL_OUTPUT
                break
        if reason is not None:
            break
    if reason is not None:
        kill()
    sel.close()
    for fd in out_fds:
        os.close(fd)
    if stdin_fd is not None:
        os.close(stdin_fd)
    return [b"".join(bufs[fd]) for fd in out_fds], reason


def _read_exact(fd: int, n: int) -> bytes:
    parts = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stream closed")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
