"""The program that runs inside a sandbox (standard library only, no gemgym imports).

Its source text, after :mod:`gemgym.sandbox._wire`'s (the messages, the value codec and
:func:`~gemgym.sandbox._wire.pump`) and :mod:`gemgym.sandbox._children`'s (what the program and
the test process run), is passed to the sandboxed interpreter with ``python -I -c``. The entry point is :func:`main_server`, a
fork-server that answers length-prefixed JSON run specs on stdin with JSON responses on stdout
(the warm pool keeps one per worker; the one-shot backends send it a single request).

For each run the server forks:

* the **program** (untrusted): the snippet, with the run's rlimits, in a fresh working directory;
* for runs with hidden tests (``check``), a **test process** (trusted, forked from the server
  before any untrusted code ran in it): it runs the tests against *proxies* of the program's
  top-level names. Every call goes to the program over a pipe; arguments and results cross as
  plain data only (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes`` and
  lists, tuples, dicts, sets and frozensets of them, exact types only), so a result whose
  ``__eq__`` lies, a patched ``builtins`` or a forged status cannot make a test pass: the verdict
  is computed in the test process, from values rebuilt there, and only it can write the verdict.

After the run the server kills every other process of the sandbox whatever its state (it is PID 1
of the sandbox's PID namespace: ``kill(-1, SIGKILL)`` reaches all of them), empties ``/tmp`` and
``/dev/shm`` (whatever modes the program set), and *verifies* that no process, file or System V
IPC object is left; a run after which that cannot be verified is reported ``unclean`` and the
host retires the worker.

A run spec is a dict: ``code``, ``prefix`` (trusted code run before ``code`` and before the
tests), ``setup`` (run before ``code`` with its output discarded), ``tests`` (whether hidden
tests follow: they come as a second message, ``{"check": code}``, that only the test process
reads, after the program was forked), ``entry_point``,
``files`` (name -> text, written to the working directory), ``stdin`` and the limits ``cpu``,
``memory``, ``fsize``, ``nproc``, ``timeout``, ``max_output``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

if "run_program" not in globals():  # on the host; inside the sandbox the others' text comes first
    from gemgym.sandbox._children import run_check, run_program
    from gemgym.sandbox._wire import (
        ACK,
        KILL_FILES,
        KILL_TIMEOUT,
        WATCH_TICK,
        FileWatch,
        pump,
        recv_message,
        send_message,
    )


# -- the fork-server -----------------------------------------------------------------------------


_LIBC: list[Any] = []


def _set_dumpable(value: int) -> None:
    """``prctl(PR_SET_DUMPABLE, value)``: 0 stops processes of the same uid from ptrace-ing this
    one or reading its memory and ``/proc`` entries; 1 (a run's program, which inherits the
    server's 0) lets the server count the program's open files."""
    try:
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        _LIBC[0].prctl(4, value, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


def _set_not_dumpable() -> None:
    """Stop processes of the same uid from ptrace-ing this one or reading its memory."""
    _set_dumpable(0)


def _other_pids() -> list[int]:
    me = os.getpid()
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in (1, me)]


def _reap() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _kill_everything() -> tuple[int, str | None]:
    """Kill every other process of the sandbox, whatever its state; verify that none is left.

    Returns how many were found and, if some survived, what was left.
    """
    found = len(_other_pids())
    deadline = time.monotonic() + 2.0
    while True:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)  # every process but PID 1 and this one
        _reap()
        left = _other_pids()
        if not left:
            return found, None
        if time.monotonic() > deadline:
            return found, f"processes left after the run: {left[:10]}"
        time.sleep(0.001)


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


class _Flooded(Exception):
    """More entries than :data:`MAX_CLEANUP_ENTRIES` to delete: the worker is retired instead."""


MAX_CLEANUP_ENTRIES = 4096
"""Files and directories the server deletes after a run at most (a few tens of milliseconds).
A run that left more (a flood of files in ``/tmp``) is reported unclean and its worker retired:
the kernel frees the whole ``tmpfs`` when the sandbox dies, and the run's result comes back at
once, as the program's own (never as a failure of the sandbox)."""

_UNLIMITED = 1 << 62
_budget = [_UNLIMITED]


def _remove(path: str) -> None:
    """Delete ``path`` (a file or a whole tree), whatever modes the program gave it.

    Raises:
        _Flooded: the cleanup's entry budget ran out.
    """
    stack = [(path, False)]
    while stack:
        current, listed = stack.pop()
        _budget[0] -= 1
        if _budget[0] < 0:
            raise _Flooded(current)
        try:
            is_dir = os.path.isdir(current) and not os.path.islink(current)
            if not is_dir:
                os.unlink(current)
                continue
            if listed:
                os.rmdir(current)
                continue
            os.chmod(current, 0o700)
            stack.append((current, True))
            stack.extend((os.path.join(current, e), False) for e in os.listdir(current))
        except OSError:
            pass


def _empty_dir(path: str) -> list[str]:
    """Delete everything under ``path`` except mount points; return what could not be deleted.

    An interpreter or venv that lives under ``/tmp`` on the host (a CI checkout) is bound
    read-only on top of the sandbox's private ``/tmp``; it is skipped rather than walked.
    """
    with contextlib.suppress(OSError):
        os.chmod(path, 0o1777 if path == "/tmp" else 0o755)
    mounts = _mount_points()
    left = []
    try:
        entries = os.listdir(path)
    except OSError as e:
        return [f"{path}: {e}"]
    for entry in entries:
        full = os.path.join(path, entry)
        if full in mounts:
            continue
        if any(m.startswith(full + "/") for m in mounts):
            with contextlib.suppress(OSError):
                os.chmod(full, 0o755)
            left += _empty_dir(full)  # a directory that holds a mount point: empty around it
            continue
        _remove(full)
        if os.path.lexists(full):
            left.append(full)
    return left


_IPC_KINDS = ("shm", "sem", "msg")


def _filtered() -> bool:
    """Whether the sandbox's seccomp filter is loaded: it denies ``memfd_create`` together with
    every System V IPC call (``_seccomp.DENIED``), so no run can make an IPC object then."""
    try:
        os.close(os.memfd_create("gemgym-probe"))
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def _ipc_objects() -> list[str]:
    """System V IPC objects of this sandbox's IPC namespace (none may outlive a run); not
    looked for where the seccomp filter denies their creation (checked once, at start)."""
    if _BASELINE.get("filtered"):
        return []
    found = []
    for kind in _IPC_KINDS:
        rows = _read(f"/proc/sysvipc/{kind}").splitlines()[1:]
        found += [f"{kind} {row.split()[1]}" for row in rows if row.split()]
    return found


def _server_state() -> tuple[Any, ...]:
    """This server's limits and scheduling, which every run inherits (checked after each run)."""
    import resource

    limits = tuple(
        resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    )
    return (
        limits,
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        tuple(sorted(os.sched_getaffinity(0))),
    )


_STATE: tuple[Any, ...] | None = None


# -- state that outlives a run's processes -------------------------------------------------------

_NET_COUNTERS = ("dev",)
"""The namespace's interface counters (``/proc/net/dev``): every packet of the namespace goes
through its loopback interface and is counted there, so any connection or datagram (and every
connection that could leave a socket in ``TIME_WAIT`` for a minute) changes them."""
_NET_SOCKETS = ("sockstat",)
"""The namespace's sockets by kind (``sockets: used`` counts every socket of the namespace, Unix
ones included). The tables themselves (``/proc/net/tcp``...) are not read: listing TCP's walks
the host's whole connection hash table (milliseconds), and they add nothing to the above."""
_HOST_WIDE = frozenset({"alloc", "mem", "memory", "orphan", "tw"})
"""Fields of ``sockstat`` that count the whole host on some kernels, not the namespace (a
``TIME_WAIT`` socket of the namespace needs packets, which ``dev`` and ``snmp`` count)."""


_KEPT: dict[str, int] = {}
"""Descriptors of the ``/proc`` files read after every run, opened once (close-on-exec; the
children close every inherited descriptor anyway): ``pread`` of a kept one costs a fraction of
an ``open`` and ``read`` right after a run, when the path lookup runs on cold caches."""


def _keep(paths: list[str]) -> None:
    for path in paths:
        if path not in _KEPT:
            with contextlib.suppress(OSError):
                _KEPT[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def _read(path: str) -> str:
    fd = _KEPT.get(path)
    try:
        if fd is None:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        chunks: list[bytes] = []
        offset = 0
        while True:
            chunk = os.pread(fd, 1 << 16, offset)
            if not chunk:
                return b"".join(chunks).decode("utf-8", "replace")
            chunks.append(chunk)
            offset += len(chunk)
    except OSError:
        return ""


def _namespace_only(text: str) -> str:
    """``sockstat`` without its host-wide fields."""
    lines = []
    for line in text.splitlines():
        head, _, rest = line.partition(":")
        words = rest.split()
        pairs = zip(words[::2], words[1::2], strict=False)
        lines.append(head + ":" + " ".join(f"{k} {v}" for k, v in pairs if k not in _HOST_WIDE))
    return "\n".join(lines)


def _net_state() -> tuple[str, ...]:
    """The network namespace's counters and sockets (compared after every run)."""
    counters = tuple(_read(f"/proc/net/{name}") for name in _NET_COUNTERS)
    sockets = tuple(_namespace_only(_read(f"/proc/net/{name}")) for name in _NET_SOCKETS)
    return counters + sockets


def _last_pid() -> int | None:
    """The last pid handed out in this PID namespace (``/proc/sys/kernel/ns_last_pid``)."""
    try:
        return int(_read("/proc/sys/kernel/ns_last_pid").strip())
    except ValueError:
        return None


def _new_inode(folder: str) -> int | None:
    """Make and remove a directory in ``folder``; its inode number (``tmpfs`` numbers them in
    order per file system, so a run that made files there moved the counter on)."""
    probe = os.path.join(folder, ".gemgym-probe")
    try:
        os.mkdir(probe)
        try:
            return os.stat(probe).st_ino
        finally:
            os.rmdir(probe)
    except OSError:
        return None


_BASELINE: dict[str, Any] = {}
"""What a clean sandbox looks like: its network state, and the counters as of the last run."""


def _take_baseline() -> None:
    _BASELINE["filtered"] = filtered = _filtered()
    _keep(
        [f"/proc/net/{name}" for name in (*_NET_COUNTERS, *_NET_SOCKETS)]
        + ["/proc/sys/kernel/ns_last_pid"]
        + ([] if filtered else [f"/proc/sysvipc/{kind}" for kind in _IPC_KINDS])
    )
    _BASELINE["net"] = _net_state()
    _BASELINE["shm_ino"] = _new_inode("/dev/shm") if os.path.isdir("/dev/shm") else None


def _verify_fresh(children: list[int], work_ino: int | None, files: int) -> list[str]:
    """Check that nothing of the run can be seen by the next one (after its cleanup):

    * the network namespace's counters and socket tables are as when the server started;
    * the PID namespace handed out no pid but the run's own children (threads count too);
    * ``/tmp`` and ``/dev/shm`` made no inode but the run's work directory, its request's
      files and the server's probes.

    Each of them would let a run learn how an earlier one went (how many pids or ports it
    spent, i.e. how often the tests called it). Returns what differs (the worker is retired).
    """
    problems = []
    if _net_state() != _BASELINE.get("net"):
        problems.append("the run left network state (sockets or counters) behind")
    last = _last_pid()
    if last is not None and children and last != children[-1]:
        problems.append(f"the run spent {last - children[-1]} pids beyond its own processes")
    if work_ino is not None:
        ino = _new_inode("/tmp")
        if ino is not None and ino != work_ino + files + 1:
            problems.append("the run made files in /tmp beyond its request's")
    shm = _BASELINE.get("shm_ino")
    if shm is not None:
        ino = _new_inode("/dev/shm")
        if ino is not None and ino != shm + 1:
            problems.append("the run made files in /dev/shm")
        _BASELINE["shm_ino"] = ino
    return problems


def _cleanup(
    isolated: bool, pids: list[int], work_ino: int | None = None, files: int = 0
) -> tuple[int, str | None]:
    """After a run: kill what is left and empty the scratch space; say what stayed behind."""
    if not isolated:
        for pid in pids:  # no PID namespace: only the run's own process groups
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        return 0, None
    strays, problem = _kill_everything()
    _budget[0] = MAX_CLEANUP_ENTRIES
    try:
        left = _empty_dir("/tmp")
        if os.path.isdir("/dev/shm"):
            left += _empty_dir("/dev/shm")
    except _Flooded:
        _budget[0] = _UNLIMITED
        problems = [problem] if problem else []
        problems.append(
            f"more than {MAX_CLEANUP_ENTRIES} files left in /tmp or /dev/shm: the sandbox is "
            "retired rather than emptied file by file"
        )
        return strays, "; ".join(problems)
    _budget[0] = _UNLIMITED
    problems = [problem] if problem else []
    problems += _verify_fresh(pids, work_ino, files)
    if _STATE is not None and _server_state() != _STATE:
        problems.append("the server's limits or scheduling were changed")
    if left:
        problems.append(f"files left after the run: {left[:10]}")
    ipc = _ipc_objects()
    if ipc:
        problems.append(f"System V IPC objects left after the run: {ipc[:10]}")
    return strays, "; ".join(problems) or None


def _fork(body: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            body()
        finally:
            os._exit(70)
    return pid


def _dup_into(fds: list[int]) -> None:
    """Make ``fds`` this process's descriptors 0, 1, 2, ... and close every other one."""
    # Move them out of the way first, so that dup2 never overwrites one still needed.
    high = [os.dup(fd) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), 65536)


def serve_one(spec: dict[str, Any], isolated: bool, tests_fd: int) -> dict[str, Any]:
    """Run one spec (its program, and its tests when it has some); return the response dict.

    With ``spec["tests"]``, the hidden tests follow on ``tests_fd`` for the test process to read.
    """
    work_ino = None
    if isolated:
        work = "/tmp/work"
        if os.path.lexists(work):
            _remove(work)
        os.mkdir(work)
        work_ino = os.stat(work).st_ino
    else:
        import tempfile

        work = tempfile.mkdtemp(prefix="gemgym-run-")
    check = True if spec.get("tests") else None
    pipes = [os.pipe() for _ in range(3)]  # the program's stdin, stdout, stderr
    if check is not None:
        pipes += [os.pipe() for _ in range(4)]  # calls, replies, verdict, test output
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = pipes[:3]
    start = time.monotonic()

    def program() -> None:
        fds = [in_r, out_w, err_w]
        if check is not None:
            fds += [pipes[3][0], pipes[4][1]]
        _dup_into(fds)
        os.chdir(work)
        if watch is not None:
            _set_dumpable(1)  # its /proc entries readable by the server (see FileWatch)
        run_program(spec, (3, 4) if check is not None else None)

    def tests() -> None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        _dup_into(
            [devnull, pipes[6][1], pipes[6][1], pipes[4][0], pipes[3][1], pipes[5][1], tests_fd]
        )
        os.chdir("/")
        run_check(spec, 3, 4, 5, 6)

    trusted = [1, os.getpid()]  # the server; the test process
    watch = FileWatch.start(trusted) if isolated else None
    children: list[int] = []
    try:
        children.append(_fork(program))
        if check is not None:
            children.append(_fork(tests))
            trusted.append(children[-1])
    except OSError as e:
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        for r, w in pipes:
            os.close(r)
            os.close(w)
        return {"error": f"fork failed: {e}"}
    for r, w in pipes:  # keep only the server's ends
        if (r, w) == pipes[0]:
            os.close(r)
        else:
            os.close(w)
        if check is not None and (r, w) in (pipes[3], pipes[4]):
            os.close(r)
    out_fds = [out_r, err_r] + ([pipes[5][0], pipes[6][0]] if check is not None else [])

    def kill() -> None:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    deadline = start + float(spec.get("timeout", 10.0))
    data = (spec.get("stdin") or "").encode()
    pidfds = [os.pidfd_open(pid) for pid in children]
    try:
        outs, reason = pump(
            in_w,
            data,
            out_fds,
            deadline,
            int(spec.get("max_output", 1 << 20)),
            kill,
            pidfds,
            watch,
        )
    finally:
        for fd in pidfds:
            os.close(fd)
    statuses = []
    next_look = time.monotonic() + WATCH_TICK
    for pid in children:
        while True:
            wpid, wstatus = os.waitpid(pid, os.WNOHANG)
            if wpid:
                break
            now = time.monotonic()
            looked = watch is not None and reason is None and now >= next_look
            if now >= deadline or (looked and watch is not None and watch()):
                # past its time, or holding too many files after closing its output
                reason = reason or (KILL_TIMEOUT if now >= deadline else KILL_FILES)
                kill()
                _, wstatus = os.waitpid(pid, 0)
                break
            if now >= next_look:
                next_look = now + WATCH_TICK
            time.sleep(0.0005)
        statuses.append(wstatus)
    duration = time.monotonic() - start
    strays, unclean = _cleanup(isolated, children, work_ino, len(spec.get("files") or {}))
    if not isolated:
        _remove(work)
    wstatus = statuses[0]
    exit_code = -os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus)
    err = outs[1].decode("utf-8", "replace")
    response: dict[str, Any] = {
        "stdout": outs[0].decode("utf-8", "replace"),
        "stderr": err,
        "exit_code": exit_code,
        "reason": reason,
        "duration": duration,
        "memory_error": err.rstrip().rsplit("\n", 1)[-1].startswith("MemoryError"),
        "strays": strays,
        "unclean": unclean,
    }
    if reason == KILL_FILES and watch is not None:
        response["note"] = watch.message
    if check is not None:
        raw = outs[2]
        if raw.startswith(b"C"):
            raw = raw[1:]
        else:  # the test process died before it took the tests: the channel may hold them
            problem = "the hidden tests were not taken from the request channel"
            response["unclean"] = f"{unclean}; {problem}" if unclean else problem
        try:
            verdict = json.loads(raw) if raw else {}
        except ValueError:
            verdict = {}
        passed = type(verdict) is dict and verdict.get("passed") is True
        error = verdict.get("error") if type(verdict) is dict else None
        if not passed and not error:
            error = "the tests did not finish" + (f" ({reason})" if reason else "")
        response["check"] = {
            "passed": passed,
            "error": str(error) if error else None,
            "output": outs[3].decode("utf-8", "replace")[-4000:],
        }
    return response


def take_protocol_fds() -> tuple[int, int]:
    """Move the protocol's stdin and stdout out of the way (``/dev/null`` takes their place, so
    nothing a child prints can reach the host); return their new descriptors."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return proto_in, proto_out


def main_server(isolated: bool = True) -> None:
    """Answer run requests (``<4-byte big-endian length><json>``) until stdin closes.

    ``isolated``: this server is alone in its sandbox (a PID namespace and a private ``/tmp``),
    so after each run it may kill every other process and empty ``/tmp``. That is only done when
    it is also PID 1 (the first process of its own PID namespace); otherwise, and when not
    ``isolated``, each run works in a fresh temporary directory and only the run's own process
    groups are killed.
    """
    global _STATE
    isolated = isolated and os.getpid() == 1
    # Python handles SIGINT; PID 1 would receive it from inside its namespace. Default: ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    proto_in, proto_out = take_protocol_fds()
    _set_not_dumpable()
    # Import what the forked children use once, here, rather than in every child.
    import builtins  # noqa: F401
    import io  # noqa: F401
    import resource  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401

    if isolated:
        _empty_dir("/tmp")
        _take_baseline()
    _STATE = _server_state()
    os.write(proto_out, b"READY\n")
    while True:
        try:
            request = recv_message(proto_in)
        except (EOFError, OSError, ValueError):
            return
        os.write(proto_out, ACK)
        try:
            response = serve_one(request, isolated, proto_in)
        except Exception as e:  # report the failure; the host restarts the server
            response = {"error": f"{type(e).__name__}: {e}"}
        response["nonce"] = request.get("nonce")
        send_message(proto_out, response)
