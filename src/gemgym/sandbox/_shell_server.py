"""The program that runs a shell session inside a sandbox (standard library only).

Its source text comes after :func:`gemgym.sandbox._host.runner_source` (the wire format, the
limits and the cleanup helpers of the fork-server), and :func:`main_shell` is its entry point. It
is PID 1 of its bubblewrap sandbox and answers length-prefixed JSON requests on stdin (the
protocol of :class:`~gemgym.sandbox._host.ServerProcess`: ``READY``, then an ``ACK`` byte and a
response carrying the request's nonce for each request):

``load``      unpack a tar archive (base64) into the workspace, as the sandbox user
``exec``      run a script with ``bash`` (non-interactive, stdin empty) in the workspace
``cmd``       run one command in the session's interactive shell (a ``bash`` on a pty, started
              on first use and restarted if it exits); the command is written to a file and
              sourced, so it may span lines and change the shell's state (``cd``, ``export``)
``keys``      type keystrokes into the pty (a program that reads the terminal, ``Ctrl-C``)
``export``    kill every process of the session and return the workspace as a tar archive
``test``      run the hidden tests (the request carries their Python modules, which never touch
              the filesystem) in a trusted child that is not dumpable and alone holds the pipe
              its verdicts go through; they report names, pass/fail and exception types only

Every child of the server runs with the session's rlimits. The end of a command is recognised
by a sentinel that the shell's ``PROMPT_COMMAND`` prints with ``$?``; a command that outlives its
timeout gets ``Ctrl-C``, then its process group ``SIGKILL``, then a new shell.
"""

from __future__ import annotations

import base64
import contextlib
import os
import select
import signal
import time
from typing import Any

if "main_server" not in globals():  # on the host; inside, the runner's source comes first
    from gemgym.sandbox._children import apply_limits
    from gemgym.sandbox._runner import (
        _dup_into,
        _kill_everything,
        _set_not_dumpable,
        take_protocol_fds,
    )
    from gemgym.sandbox._shell_tests import _run_tests, _wait
    from gemgym.sandbox._wire import (
        ACK,
        KILL_FILES,
        WATCH_TICK,
        FileWatch,
        pump,
        recv_message,
        send_message,
    )

_MAX_REQUEST = 512 << 20
_QUIET = 0.3
"""Seconds without output after which typed keystrokes are answered (the program still runs)."""


class _Shell:
    """An interactive ``bash`` on a pty, and the state of the command it runs."""

    def __init__(self, env: dict[str, str], limits: dict[str, Any], workspace: str) -> None:
        self.nonce = os.urandom(8).hex()
        self.sentinel = ("\x1e" + self.nonce + ":").encode()
        self.env = dict(env)
        self.env.update(
            TERM="dumb",
            PAGER="cat",
            GIT_PAGER="cat",
            PS1="",
            PS2="",
            HISTFILE="",
            PROMPT_COMMAND="printf '\\036%s:%d\\037' " + self.nonce + " $?",
        )
        self.limits = limits
        self.workspace = workspace
        self.pid = 0
        self.fd = -1
        self.busy = False
        self.pending = b""

    def start(self) -> str:
        import pty
        import termios

        pid, fd = pty.fork()
        if pid == 0:
            try:
                attrs = termios.tcgetattr(0)
                attrs[1] &= ~termios.ONLCR
                attrs[3] &= ~(termios.ECHO | termios.ECHOE | termios.ECHOK | termios.ECHONL)
                termios.tcsetattr(0, termios.TCSANOW, attrs)
                os.closerange(3, 65536)
                apply_limits(self.limits)
                _default_signals()
                os.chdir(self.workspace)
                argv = ["/bin/bash", "--noprofile", "--norc", "--noediting", "-i"]
                os.execve(argv[0], argv, self.env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.busy = False
        self.pending = b""
        out, status, _ = self.read_until_prompt(time.monotonic() + 10.0)
        if status is None:
            self.kill()
            return "the shell did not start: " + out.decode("utf-8", "replace")[-500:]
        return ""

    def alive(self) -> bool:
        if not self.pid:
            return False
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def kill(self) -> None:
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.pid, self.fd, self.busy = 0, -1, False

    def _parse(self, data: bytes) -> tuple[bytes, int | None]:
        at = data.find(self.sentinel)
        if at < 0:
            return data, None
        end = data.find(b"\x1f", at)
        if end < 0:
            return data, None
        try:
            status = int(data[at + len(self.sentinel) : end])
        except ValueError:
            status = -1
        self.pending = data[end + 1 :]
        return data[:at], status

    def read_until_prompt(
        self,
        deadline: float,
        quiet: float | None = None,
        max_output: int = 1 << 20,
        watch: FileWatch | None = None,
    ) -> tuple[bytes, int | None, str | None]:
        """Output until the prompt's sentinel (then the status), ``deadline`` or, with ``quiet``,
        that many seconds without output. Returns the output (head and tail kept within
        ``max_output``), the status (``None``: no prompt yet) and ``"output"``, ``"exited"`` or
        ``"open_files"`` (``watch``, looked at every :data:`WATCH_TICK`, said so)."""
        data, self.pending = self.pending, b""
        half = max(1, max_output // 2)
        head = b""
        dropped = 0

        def clip(tail: bytes) -> bytes:
            nonlocal head, dropped
            if not head and len(tail) <= max_output:
                return tail
            if not head:
                head, tail = tail[:half], tail[half:]
            if len(tail) > half:
                dropped += len(tail) - half
                tail = tail[-half:]
            return head + f"\n[... {dropped:,} bytes cut ...]\n".encode() + tail

        heard = time.monotonic()  # the last output (``quiet`` counts from there)
        next_look = heard + WATCH_TICK
        while True:
            text, status = self._parse(data)
            if status is not None:
                return clip(text), status, None
            if watch is not None and time.monotonic() >= next_look:
                if watch():
                    return clip(data), None, KILL_FILES
                next_look = time.monotonic() + WATCH_TICK
            if len(data) > 2 * max_output:  # keep the head, and the tail (the sentinel's in it)
                data = clip(data)[len(head) :]
                data = data[data.index(b"cut ...]\n") + 9 :]
                if dropped > 16 * max_output:
                    return clip(data), None, "output"
            now = time.monotonic()
            wait = deadline - now if quiet is None else min(deadline - now, heard + quiet - now)
            if wait <= 0:
                return clip(data), None, None
            tick = max(0.0, next_look - now) if watch is not None else wait
            if not select.select([self.fd], [], [], min(wait, tick))[0]:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                return clip(data), None, "exited"
            data += chunk
            heard = time.monotonic()

    def interrupt(self) -> tuple[bytes, int | None]:
        """Ctrl-C; then SIGKILL to the foreground process group; then a new shell."""
        os.write(self.fd, b"\x03")
        out, status, _ = self.read_until_prompt(time.monotonic() + 1.0, max_output=1 << 16)
        if status is not None:
            return out, status
        with contextlib.suppress(OSError):
            group = os.tcgetpgrp(self.fd)
            if group > 1 and group != self.pid:
                os.killpg(group, signal.SIGKILL)
                more, status, _ = self.read_until_prompt(time.monotonic() + 1.0, max_output=1 << 16)
                out += more
                if status is not None:
                    return out, status
        self.kill()
        return out, None


def _answer(out: bytes, status: int | None, **extra: Any) -> dict[str, Any]:
    """The response to a ``cmd`` or ``keys`` request."""
    return {"output": out.decode("utf-8", "replace"), "status": status, **extra}


def _finish(
    shell: _Shell, out: bytes, status: int | None, how: str | None, keys: bool
) -> dict[str, Any]:
    """Answer a command or keystrokes from what :meth:`_Shell.read_until_prompt` returned: the
    status at the prompt; a shell that exited; a program still running (keystrokes); or, for a
    command past its timeout or output limit, what stopping it took."""
    if how == "exited" or (status is None and not shell.alive()):
        code = None
        with contextlib.suppress(ChildProcessError, OSError):
            _, wstatus = os.waitpid(shell.pid, 0)
            code = os.waitstatus_to_exitcode(wstatus)
        shell.pid = 0
        shell.kill()
        return _answer(out, code, shell_exited=True)
    if status is not None:
        shell.busy = False
        return _answer(out, status)
    if keys and how is None:
        shell.busy = True
        return _answer(out, None, running=True)
    more, status = shell.interrupt()
    return _answer(
        out + more,
        124 if status is not None else None,
        killed_by="output" if how == "output" else "timeout",
        shell_exited=status is None,
    )


def _default_signals() -> None:
    """In a child before ``exec``: the signal dispositions a program expects (Python ignores
    ``SIGPIPE``, so ``yes | head`` would print an error instead of ending quietly)."""
    for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)


def _ensure_shell(shell: _Shell) -> str:
    if shell.alive():
        return ""
    shell.kill()
    return shell.start()


def _shell_cmd(shell: _Shell, req: dict[str, Any]) -> dict[str, Any]:
    problem = _ensure_shell(shell)
    if problem:
        return {"error": problem}
    deadline = time.monotonic() + float(req.get("timeout", 10.0))
    max_output = int(req.get("max_output", 1 << 20))
    before = b""
    if shell.pending or select.select([shell.fd], [], [], 0)[0]:  # background output
        before, status, how = shell.read_until_prompt(time.monotonic(), quiet=0.0)
        if shell.busy and (status is not None or how == "exited"):
            shell.busy = False
            if how == "exited":
                shell.kill()
                problem = shell.start()
                if problem:
                    return {"error": problem}
    if shell.busy:  # a program started by keystrokes still has the terminal
        return _answer(before, None, running=True, note="busy")
    text = str(req.get("text", "")) + "\n"
    try:
        path = _write_command(text)
    except OSError as e:
        return _answer(before, None, note=f"the command could not be written to /tmp: {e}")
    watch = _watch(shell)
    os.write(shell.fd, b". " + path.encode() + b"\n")
    out, status, how = shell.read_until_prompt(deadline, max_output=max_output, watch=watch)
    with contextlib.suppress(OSError):
        os.unlink(path)
    if how == KILL_FILES and watch is not None:
        return _files_killed(shell, before + out, watch.message)
    return _finish(shell, before + out, status, how, False)


def _watch(shell: _Shell | None) -> FileWatch | None:
    """A watch over the session's open files from now on (see :class:`FileWatch`); the shell
    is stopped first and continued last when its processes are counted."""
    return FileWatch.start([1, os.getpid()], shell.pid if shell is not None and shell.pid else None)


def _files_killed(shell: _Shell, out: bytes, message: str) -> dict[str, Any]:
    """Kill every process of the session (the shell too: the next command gets a new one)
    after they held more files than the session may; answer with why."""
    _kill_everything()
    shell.pid = 0  # reaped above
    shell.kill()
    return _answer(out, None, killed_by=KILL_FILES, shell_exited=True, note=message)


def _others_run(shell: _Shell) -> bool:
    """Whether a process of the session other than the server and its shell exists."""
    mine = (1, os.getpid(), shell.pid)
    return any(e.isdigit() and int(e) not in mine for e in os.listdir("/proc"))


def _idle(shell: _Shell, channel: int) -> str | None:
    """Wait until the next request can be read from ``channel``. While processes of the session
    run meanwhile (background jobs, a program started by keystrokes) their files are watched;
    an idle shell alone makes none, so nothing is watched then. Returns why the session's
    processes were killed, if they were."""
    watch: FileWatch | None = None
    ticks = 0
    while not select.select([channel], [], [], 0 if watch is None else WATCH_TICK)[0]:
        if watch is None or ticks >= 100:  # look again for processes every second
            if not _others_run(shell):
                select.select([channel], [], [], None)
                return None
            watch = watch or _watch(shell)
            if watch is None:
                return None
            ticks = 0
            continue
        ticks += 1
        if watch():
            return str(_files_killed(shell, b"", watch.message)["note"])
    return None


def _write_command(text: str) -> str:
    """Write a command to a new file of a name nobody can guess (the shell sources it)."""
    for attempt in range(2):
        path = "/tmp/.cmd-" + os.urandom(8).hex()
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fd = os.open(path, flags, 0o600)
        except PermissionError:
            if attempt:
                raise
            os.chmod("/tmp", 0o1777)  # the agent took its own /tmp away: give it back
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    raise OSError("unreachable")


def _shell_keys(shell: _Shell, req: dict[str, Any]) -> dict[str, Any]:
    problem = _ensure_shell(shell)
    if problem:
        return {"error": problem}
    data = base64.b64decode(str(req.get("keys", "")))
    if not data and not shell.busy:
        return _answer(b"", None)
    deadline = time.monotonic() + float(req.get("timeout", 10.0))
    watch = _watch(shell)
    if data:
        os.write(shell.fd, data)
    out, status, how = shell.read_until_prompt(
        deadline,
        quiet=float(req.get("quiet", _QUIET)),
        max_output=int(req.get("max_output", 1 << 20)),
        watch=watch,
    )
    if how == KILL_FILES and watch is not None:
        return _files_killed(shell, out, watch.message)
    return _finish(shell, out, status, how, True)


def _child_run(
    argv: list[str],
    stdin: bytes,
    timeout: float,
    limits: dict[str, Any],
    cwd: str,
    env: dict[str, str],
    max_output: int,
    shell: _Shell | None = None,
) -> dict[str, Any]:
    """Run ``argv`` in a child with the session's limits; collect its output (``shell``: the
    session's shell, which may still run jobs, for the open-files watch)."""
    pipes = [os.pipe() for _ in range(3)]
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            _dup_into([pipes[0][0], pipes[1][1], pipes[2][1]])
            apply_limits(limits)
            _default_signals()
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    os.close(pipes[0][0])
    os.close(pipes[1][1])
    os.close(pipes[2][1])

    def kill() -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)

    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid)
    watch = _watch(shell)
    try:
        outs, reason = pump(
            pipes[0][1],
            stdin,
            [pipes[1][0], pipes[2][0]],
            deadline,
            max_output,
            kill,
            [pidfd],
            watch,
        )
    finally:
        os.close(pidfd)
    wstatus = _wait(pid, deadline, kill)
    kill()  # what it left running in the background
    if reason == KILL_FILES and watch is not None:
        # The session's other processes were stopped for the count: they go too.
        _kill_everything()
        if shell is not None:
            shell.pid = 0  # reaped above
            shell.kill()
        outs[1] += f"\n{watch.message}\n".encode()
    return {
        "stdout": outs[0],
        "stderr": outs[1],
        "status": os.waitstatus_to_exitcode(wstatus),
        "reason": reason,
    }


def _serve(req: dict[str, Any], shell: _Shell, state: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    limits, env, workspace = state["limits"], state["env"], state["workspace"]
    if op == "cmd":
        return _shell_cmd(shell, req)
    if op == "keys":
        return _shell_keys(shell, req)
    if op == "exec":
        done = _child_run(
            ["/bin/bash", "-c", str(req.get("script", ""))],
            b"",
            float(req.get("timeout", 60.0)),
            limits,
            workspace,
            env,
            int(req.get("max_output", 1 << 20)),
            shell,
        )
        return {
            "stdout": done["stdout"].decode("utf-8", "replace"),
            "stderr": done["stderr"].decode("utf-8", "replace"),
            "status": done["status"],
            "reason": done["reason"],
        }
    if op == "load":
        data = base64.b64decode(str(req.get("tar", "")))
        done = _child_run(
            ["/bin/tar", "-x", "-p", "-f", "-", "-C", workspace],
            data,
            60.0,
            limits,
            workspace,
            env,
            1 << 20,
            shell,
        )
        return {"status": done["status"], "stderr": done["stderr"].decode("utf-8", "replace")}
    if op == "export":
        shell.kill()
        _kill_everything()
        # Whatever modes the agent left, its owner may read everything: nothing is lost.
        _child_run(["/bin/chmod", "-R", "u+rwX", workspace], b"", 60.0, limits, "/", env, 1 << 16)
        done = _child_run(
            ["/bin/tar", "-c", "-f", "-", "-C", workspace, "."],
            b"",
            60.0,
            limits,
            "/",
            env,
            int(req.get("max_size", 1 << 30)),
        )
        _kill_everything()
        return {
            "status": done["status"],
            "reason": done["reason"],
            "stderr": done["stderr"].decode("utf-8", "replace")[-2000:],
            "tar": base64.b64encode(done["stdout"]).decode("ascii"),
        }
    if op == "test":
        shell.kill()
        return _run_tests(req, limits, workspace)
    return {"error": f"unknown request {op!r}"}


def main_shell(config: dict[str, Any]) -> None:
    """Serve shell-session requests until stdin closes (see the module docstring)."""
    # PID 1 gets no signal from inside its namespace that it has no handler for; and ignored
    # signals would be inherited by every program of the shell (Ctrl-C would stop nothing).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    proto_in, proto_out = take_protocol_fds()
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    _set_not_dumpable()
    state = {
        "limits": config["limits"],
        "env": config["env"],
        "workspace": config["workspace"],
    }
    shell = _Shell(config["env"], config["limits"], config["workspace"])
    os.write(proto_out, b"READY\n")
    while True:
        killed = _idle(shell, proto_in)
        try:
            request = recv_message(proto_in, _MAX_REQUEST)
        except (EOFError, OSError, ValueError):
            shell.kill()
            return
        os.write(proto_out, ACK)
        try:
            response = _serve(request, shell, state)
        except Exception as e:  # report it; the host closes the session
            response = {"error": f"{type(e).__name__}: {e}"}
        _reap_others(shell)
        if killed:  # the session's background processes, since the last request
            note = "background processes were killed: " + killed
            response["note"] = "; ".join(filter(None, [note, response.get("note")]))
        response["nonce"] = request.get("nonce")
        send_message(proto_out, response)


def _reap_others(shell: _Shell) -> None:
    """Reap exited children (background jobs re-parented to PID 1), but never the shell."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, shell.pid):
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(int(entry), os.WNOHANG)
