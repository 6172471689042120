"""The hidden tests of a shell session, run inside its sandbox (standard library only).

Part of the shell server's program (:mod:`gemgym.sandbox._shell_server`): its source text comes
after the fork-server's (:func:`gemgym.sandbox._host.runner_source`) and before the shell
server's. :func:`_run_tests` runs a ``test`` request: the hidden test modules come in the
request and are imported from memory (they never touch the filesystem the agent's programs can
read), in a child that is not dumpable and alone holds the pipe its verdicts go through; the
verdicts carry names, pass/fail and exception types only. :func:`_wait` waits for a child of
the server until a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Any

if "main_server" not in globals():  # on the host; inside, the runner's source comes first
    from gemgym.sandbox._children import apply_limits
    from gemgym.sandbox._runner import _dup_into, _kill_everything, _set_not_dumpable
    from gemgym.sandbox._wire import KILL_FILES, FileWatch, pump


def _wait(pid: int, deadline: float, kill: Any) -> int:
    """Wait for ``pid`` until ``deadline``, then ``kill()`` it; its wait status."""
    while True:
        done, wstatus = os.waitpid(pid, os.WNOHANG)
        if done:
            return wstatus
        if time.monotonic() >= deadline:
            kill()
            return os.waitpid(pid, 0)[1]
        time.sleep(0.0005)


_RUNNER = r"""
import builtins, errno, fcntl, importlib.machinery, importlib.util, io, json, os, stat, sys

fd = 3
def emit(obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]

# Answer files are opened without blocking: a FIFO, socket or device fails its test at once
# (a FIFO would stall the tests until the verifier's timeout; /dev/zero would never end).
_open = io.open
_DEV_NULL = os.makedev(1, 3)
def _opener(path, flags):
    fd = os.open(path, flags | os.O_NONBLOCK, 0o666)
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        regular = stat.S_ISREG(mode.st_mode)
        if not regular and not (stat.S_ISCHR(mode.st_mode) and mode.st_rdev == _DEV_NULL):
            raise OSError(errno.EINVAL, "not a regular file (FIFO, socket or device)", path)
        if not flags & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd
def _guarded_open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None,
                  closefd=True, opener=None):
    if opener is None and not isinstance(file, int):
        opener = _opener
    return _open(file, mode, buffering, encoding, errors, newline, closefd, opener)
builtins.open = io.open = _guarded_open

# The tests' Python modules are served from memory: they never exist on the filesystem that
# the agent's programs see (other files of tests/ are bound read-only at /tests).
MODULES = {}
for rel, source in SOURCES.items():
    parts = rel[:-3].split("/")
    package = parts[-1] == "__init__"
    name = ".".join(parts[:-1] if package else parts)
    if name:
        MODULES[name] = (source, "/tests/" + rel, package)
class _MemoryFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in MODULES:
            return None
        _, origin, package = MODULES[name]
        spec = importlib.util.spec_from_loader(name, cls, origin=origin, is_package=package)
        spec.has_location = True
        if package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec
    @staticmethod
    def create_module(spec):
        return None
    @staticmethod
    def exec_module(module):
        source, origin, _ = MODULES[module.__spec__.name]
        module.__file__ = origin
        exec(compile(source, origin, "exec"), module.__dict__)
at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), 0)
sys.meta_path.insert(at, _MemoryFinder)
SOURCES = None

# Verdicts carry test names and exception types only: never the tests' text or values.
files = sorted((r for r in MODULES.values() if "/" not in r[1][7:]
                and os.path.basename(r[1]).startswith("test") and not r[2]), key=lambda r: r[1])
tests = []
for _, origin, _ in files:
    name = os.path.basename(origin)
    try:
        module = importlib.import_module(name[:-3])
    except BaseException as e:
        emit({"error": "%s could not be loaded (%s)" % (name, type(e).__name__)})
        sys.exit(0)
    tests += [("%s::%s" % (name, k), v) for k, v in vars(module).items()
              if k.startswith("test") and callable(v)]
emit({"total": [t[0] for t in tests]})
for name, fn in tests:
    os.chdir("/app")
    try:
        fn()
        emit({"test": name, "passed": True})
    except BaseException as e:
        emit({"test": name, "passed": False, "error": type(e).__name__})
emit({"done": True})
"""


def _run_tests(req: dict[str, Any], limits: dict[str, Any], workspace: str) -> dict[str, Any]:
    """Run the hidden tests in a trusted child: their modules come from the request (memory
    only), the child is not dumpable, and its verdicts come through a pipe only it holds."""
    _kill_everything()
    sources = req.get("modules")
    if not isinstance(sources, dict):
        sources = {}
    verdict_r, verdict_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            _set_not_dumpable()
            devnull = os.open(os.devnull, os.O_RDONLY)
            _dup_into([devnull, out_w, out_w, verdict_w])
            os.set_inheritable(3, False)
            apply_limits(limits)
            os.chdir(workspace)
            script = compile(_RUNNER, "<test-runner>", "exec")
            exec(script, {"__name__": "__tests__", "SOURCES": dict(sources)})
            os._exit(0)
        except SystemExit:
            os._exit(0)
        except BaseException:
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()  # into the output, which the host keeps to itself
                sys.stderr.flush()
            os._exit(70)
        finally:
            os._exit(70)
    os.close(verdict_w)
    os.close(out_w)

    def kill() -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    deadline = time.monotonic() + float(req.get("timeout", 60.0))
    pidfd = os.pidfd_open(pid)
    # The tests run the agent's code: its files are watched too (the test process is not
    # dumpable, so a rise of the host's files past the limit meanwhile ends the tests).
    watch = FileWatch.start([1, os.getpid()])
    try:
        outs, reason = pump(None, b"", [verdict_r, out_r], deadline, 8 << 20, kill, [pidfd], watch)
    finally:
        os.close(pidfd)
    if reason == KILL_FILES and watch is not None:
        outs[1] += f"\n{watch.message}\n".encode()
    _wait(pid, deadline, kill)
    _kill_everything()
    return {
        "verdicts": outs[0].decode("utf-8", "replace"),
        "output": outs[1].decode("utf-8", "replace")[-4000:],
        "reason": reason,
    }
