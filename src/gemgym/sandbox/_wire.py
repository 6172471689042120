"""The wire format between the host, the fork-server and the processes of a run (standard library
only, no gemgym imports).

Its source text is put in front of :mod:`gemgym.sandbox._runner`'s when that is passed to the
sandboxed interpreter; the host imports it as a module. Length-prefixed JSON messages
(:func:`send_message`, :func:`recv_message`), the plain-value codec between the program and the
trusted test process (:func:`encode_value`, :func:`decode_value`), and :func:`pump`, which feeds a
process's stdin and collects its output under a deadline and an output cap.
"""

from __future__ import annotations

import json
import os
import selectors
import time
from collections.abc import Callable
from typing import Any

KILL_TIMEOUT = "timeout"
KILL_OUTPUT = "output"
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


def pump(
    stdin_fd: int | None,
    data: bytes,
    out_fds: list[int],
    deadline: float,
    max_output: int,
    kill: Callable[[], None],
    exit_fds: list[int] = (),  # type: ignore[assignment]
) -> tuple[list[bytes], str | None]:
    """Feed ``data`` to ``stdin_fd`` and read ``out_fds`` until they close.

    With ``exit_fds`` (pidfds of the processes), stops once all of them have exited and what
    they wrote is drained, even when a background process still holds the pipes open. Stops
    early (calling ``kill``) at ``deadline`` (``time.monotonic()``) or once more than
    ``max_output`` bytes were read in total. Returns the bytes read per fd (capped at
    ``max_output`` in total) and ``"timeout"``, ``"output"`` or ``None``. Closes every fd given
    except the ``exit_fds``.
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
    while open_reads:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = KILL_TIMEOUT
            break
        events = sel.select(0 if exited and exit_fds else min(left, 1.0))
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
