"""The math-verify processes behind :class:`gemgym.grading.pool.GradingPool`.

``python -m gemgym.grading._worker FD`` starts a *template* process: it imports and warms up
math-verify, says ``ready`` on the Unix socket ``FD``, then forks one worker per request (a
message carrying the worker's socket) and answers with the worker's pid. Forking from a warm,
single-threaded template starts a worker in milliseconds, so a worker killed for running past its
time limit is replaced at once.

A worker reads one JSON request per line (``{"gold": str, "pred": str}``) and answers each with
one line (``{"ok": bool}``) until its socket closes. The caller enforces time limits by killing
it, so math-verify's own signal-based timeouts are switched off.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys

_WARM_UP = (
    ("(x+1)^2", "x^2+2x+1"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("[1,2)", "(1,2]"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)"),
    ("x=3", "3"),
)


def _verify(gold: str, pred: str) -> bool:
    from math_verify import parse, verify

    gold_parsed = parse(f"${gold}$", parsing_timeout=None)
    pred_parsed = parse(f"${pred}$", parsing_timeout=None)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def _serve(conn: socket.socket) -> None:
    rfile = conn.makefile("r", encoding="utf-8")
    for line in rfile:
        try:
            req = json.loads(line)
            ok = _verify(str(req["gold"]), str(req["pred"]))
        except Exception:  # a parse or sympy failure is "not equal", never a crash
            ok = False
        conn.sendall(b'{"ok": true}\n' if ok else b'{"ok": false}\n')


def main(ctrl_fd: int) -> None:
    """Run the template process on the control socket ``ctrl_fd``."""
    logging.disable(logging.CRITICAL)  # math-verify warns on every call with timeouts disabled
    # Its grammars and sympy paths compile lazily (measured figures: docs/benchmarks.md): pay
    # that once, here.
    for gold, pred in _WARM_UP:
        _verify(gold, pred)
    ctrl = socket.socket(fileno=ctrl_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped automatically
    ctrl.sendall(b"ready\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 16, 1)
        except OSError:
            break
        if not msg or not fds:
            break
        pid = os.fork()
        if pid == 0:
            ctrl.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _serve(socket.socket(fileno=fds[0]))
            finally:
                os._exit(0)
        os.close(fds[0])
        ctrl.sendall(f"{pid}\n".encode())


if __name__ == "__main__":
    main(int(sys.argv[1]))
