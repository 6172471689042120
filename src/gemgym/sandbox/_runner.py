"""The program that runs inside a sandbox (standard library only, no gemgym imports).

Its source text is passed to the sandboxed interpreter with ``python -I -c``; the host also
imports it for :func:`pump`. Two entry points:

* :func:`main_oneshot` — one snippet per interpreter: read the run spec from the head of stdin
  (``<length>\\n<json>``), apply the limits, run the snippet, write the outcome to the status fd.
* :func:`main_server` — the warm fork-server: read length-prefixed JSON requests on stdin, fork one
  child per snippet (limits applied in the child), kill every other process in the sandbox's PID
  namespace after each run, empty ``/tmp``, and answer with a JSON response on stdout.

A run spec is a dict: ``code``, ``setup`` (run first with its output discarded), ``check`` (run after
``code`` in the same namespace; ``check_passed`` is reported only when it completes), ``files``
(name -> text, written to the working directory), ``stdin`` and the limits ``cpu``, ``memory``,
``fsize``, ``nproc``, ``timeout``, ``max_output``.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

KILL_TIMEOUT = "timeout"
KILL_OUTPUT = "output"


def pump(
    stdin_fd: int | None,
    data: bytes,
    out_fds: list[int],
    deadline: float,
    max_output: int,
    kill: Callable[[], None],
    exit_fd: int | None = None,
) -> tuple[list[bytes], str | None]:
    """Feed ``data`` to ``stdin_fd`` and read ``out_fds`` until they close.

    With ``exit_fd`` (a pidfd of the program), stops once the program has exited and what it
    wrote is drained, even when a background process still holds the pipes open. Stops early (calling ``kill``) at ``deadline`` (``time.monotonic()``) or once more than
    ``max_output`` bytes were read in total. Returns the bytes read per fd (capped at
    ``max_output`` in total) and ``"timeout"``, ``"output"`` or ``None``. Closes every fd given.
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
    if exit_fd is not None:
        sel.register(exit_fd, selectors.EVENT_READ)
    exited = False
    total = 0
    reason: str | None = None
    open_reads = len(out_fds)
    while open_reads:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = KILL_TIMEOUT
            break
        events = sel.select(0 if exited else min(left, 1.0))
        if exited and not any(int(k.fd) in bufs for k, _ in events):
            break  # the program is gone and its output is drained
        for key, _ in events:
            fd = int(key.fd)
            if fd == exit_fd:
                sel.unregister(fd)
                exited = True
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


def apply_limits(spec: dict[str, Any]) -> None:
    """Apply the run's resource limits to this process (inherited by its children)."""
    import resource

    def lim(which: int, value: int | None) -> None:
        if value is not None and value > 0:
            resource.setrlimit(which, (value, value))

    cpu = spec.get("cpu")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))
    lim(resource.RLIMIT_AS, spec.get("memory"))
    lim(resource.RLIMIT_FSIZE, spec.get("fsize"))
    lim(resource.RLIMIT_NPROC, spec.get("nproc"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Python ignores SIGXFSZ; restore the default so that the file-size limit is visible.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _print_exc(exc: BaseException) -> None:
    import traceback

    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None  # drop this runner's own frame
    traceback.print_exception(type(exc), exc, tb)


def run_snippet(spec: dict[str, Any], status_fd: int) -> None:
    """Run ``spec``'s code as ``__main__`` in this process, report, and ``os._exit``."""
    import builtins
    import io
    import types

    for name, text in (spec.get("files") or {}).items():
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
    apply_limits(spec)
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    sys.argv = ["-c"]
    namespace = module.__dict__
    status: dict[str, Any] = {"memory_error": False, "check_passed": None}
    code = 0
    setup = spec.get("setup")
    if setup:
        real_out, real_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = io.StringIO()
        try:
            exec(compile(setup, "<setup>", "exec"), namespace)
        except BaseException:
            pass
        finally:
            sys.stdout, sys.stderr = real_out, real_err
    check = spec.get("check")
    try:
        exec(compile(spec.get("code", ""), "<string>", "exec"), namespace)
        if check is not None:
            status["check_passed"] = False
            exec(compile(check, "<check>", "exec"), namespace)
            status["check_passed"] = True
    except SystemExit as e:
        code = _exit_code(e)
    except MemoryError as e:
        status["memory_error"] = True
        _print_exc(e)
        code = 1
    except BaseException as e:
        _print_exc(e)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    if status_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(status_fd, json.dumps(status).encode())
    os._exit(code)


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


def main_oneshot(status_fd: int) -> None:
    """Read the spec from the head of stdin and run it (one snippet per interpreter)."""
    header = b""
    while not header.endswith(b"\n"):
        header += os.read(0, 1)
        if len(header) > 24:
            raise SystemExit("bad run header")
    spec = json.loads(_read_exact(0, int(header)))
    run_snippet(spec, status_fd)


# -- the warm fork-server --------------------------------------------------------------------


def _set_not_dumpable() -> None:
    """Stop snippets (same uid) from ptrace-ing the server or reading its memory."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


def _stray_pids() -> list[int]:
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                found.append(int(entry))
    return found


def _kill_strays() -> int:
    """Kill every process in the sandbox except PID 1 (bwrap) and this server."""
    killed = 0
    for _ in range(200):
        pids = _stray_pids()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.001)
    return killed


_MOUNTS: list[str] | None = None


def _mount_points() -> list[str]:
    """Mount points in this sandbox (read once): read-only binds that may sit under ``/tmp``."""
    global _MOUNTS
    if _MOUNTS is None:
        found = []
        try:
            with open("/proc/self/mountinfo", encoding="utf-8") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) > 4:
                        found.append(fields[4].replace("\\040", " "))
        except OSError:
            pass
        _MOUNTS = found
    return _MOUNTS


def _empty_dir(path: str) -> None:
    """Delete everything under ``path`` except mount points (and the directories holding them).

    An interpreter or venv that lives under ``/tmp`` on the host (a CI checkout) is bound
    read-only on top of the sandbox's private ``/tmp``; walking it to delete it would cost
    every snippet a recursive scan of the whole venv, so it is skipped.
    """
    import shutil

    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if full in _mount_points():
            continue
        if any(m.startswith(full + "/") for m in _mount_points()):
            _empty_dir(full)  # a directory that holds a mount point: empty around it
            continue
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full, ignore_errors=True)
            else:
                os.unlink(full)
        except OSError:
            pass


def serve_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one spec in a forked child and return the response dict."""
    _empty_dir("/tmp")
    work = "/tmp/work"
    os.mkdir(work)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    start = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w, st_r, st_w):
            os.close(fd)
        return {"error": f"fork failed: {e}"}
    if pid == 0:  # the child: becomes the snippet
        try:
            os.setsid()
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(st_w, 3)
            os.closerange(4, 65536)
            os.chdir(work)
            run_snippet(spec, 3)
        finally:
            os._exit(70)
    for fd in (in_r, out_w, err_w, st_w):
        os.close(fd)

    def kill() -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    deadline = start + float(spec.get("timeout", 10.0))
    data = (spec.get("stdin") or "").encode()
    pidfd = os.pidfd_open(pid)
    try:
        (out, err, st), reason = pump(
            in_w,
            data,
            [out_r, err_r, st_r],
            deadline,
            int(spec.get("max_output", 1 << 20)),
            kill,
            exit_fd=pidfd,
        )
    finally:
        os.close(pidfd)
    if reason is None:
        # The snippet's pipes closed (it exited, or handed them on); wait for it to exit.
        while True:
            wpid, wstatus = os.waitpid(pid, os.WNOHANG)
            if wpid:
                break
            if time.monotonic() >= deadline:
                reason = KILL_TIMEOUT
                kill()
                _, wstatus = os.waitpid(pid, 0)
                break
            time.sleep(0.0005)
    else:
        _, wstatus = os.waitpid(pid, 0)
    duration = time.monotonic() - start
    strays = _kill_strays()
    _empty_dir("/tmp")
    if os.path.isdir("/dev/shm"):
        _empty_dir("/dev/shm")
    if os.WIFSIGNALED(wstatus):
        exit_code = -os.WTERMSIG(wstatus)
    else:
        exit_code = os.WEXITSTATUS(wstatus)
    return {
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "exit_code": exit_code,
        "reason": reason,
        "status": st.decode("utf-8", "replace"),
        "duration": duration,
        "strays": strays,
    }


def main_server() -> None:
    """Answer run requests (``<4-byte big-endian length><json>``) until stdin closes."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _set_not_dumpable()
    # Import what the forked children use once, here, rather than in every child.
    import builtins  # noqa: F401
    import io  # noqa: F401
    import resource  # noqa: F401
    import shutil  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401

    os.write(proto_out, b"READY\n")
    while True:
        try:
            size = int.from_bytes(_read_exact(proto_in, 4), "big")
            request = json.loads(_read_exact(proto_in, size))
        except (EOFError, OSError):
            return
        try:
            response = serve_one(request)
        except Exception as e:  # report the failure; the host restarts the server if needed
            response = {"error": f"{type(e).__name__}: {e}"}
        response["nonce"] = request.get("nonce")
        body = json.dumps(response).encode()
        write_all(proto_out, len(body).to_bytes(4, "big") + body)
