"""A shell session in a bubblewrap sandbox: :class:`ShellSession`.

One long-lived ``bash`` per session, on a pty, inside one sandbox with the hardening of
:mod:`gemgym.sandbox.bwrap` (never host root, seccomp, no network, its own cgroups, a cleared
environment): a writable, size-capped workspace (``/app``) and ``/tmp`` over the host's read-only
``/usr``. Each :meth:`~ShellSession.run` sends one command over the session's pipes and reads
its output up to a sentinel the shell prints with the exit status, so a warm ``echo hi`` costs
about a millisecond (``benchmarks/terminal.py``). The session's own server (not the shell) is
PID 1; it runs each request and answers the host (see :mod:`gemgym.sandbox._shell_server`).

The interpreter inside is the system's ``/usr/bin/python3``, and the shell sees the system
directories only: no virtual environment of the host is bound (whatever interpreter it was made
from), and gemgym itself is covered by an empty read-only ``tmpfs`` wherever it is installed under
``/usr`` (its package, its ``dist-info``), so no task's files, tests or solutions are visible;
directories named in ``hide`` are covered the same way.

A grading session (``tests=``) never puts the tests' Python modules on the sandbox's
filesystem: they travel in the ``test`` request and are imported from memory by the trusted,
not-dumpable test runner (other files of the tests directory, data the tests read, are bound
read-only at ``/tests``). See docs/terminal.md, "Threat model".
"""

from __future__ import annotations

import atexit
import base64
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, SandboxError, SandboxUnavailableError
from gemgym.sandbox._host import CLEAN_ENV, NotStarted, ServerProcess, WorkerDied, runner_source
from gemgym.sandbox._seccomp import seccomp_program
from gemgym.sandbox.base import Limits
from gemgym.sandbox.bwrap import ProcessLimiter, ProcessLimitMode, bwrap_argv, require_bwrap

__all__ = ["CommandResult", "ShellSession", "TestReport", "decode_keys"]

WORKSPACE = "/app"
"""Where the workspace is, inside the sandbox."""
_SYSTEM_PYTHON = "/usr/bin/python3"
_SERVER_CODE = "/.shell-server"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_MAX_TESTS = 64 << 20
"""Bytes of a tests directory, at most (its modules travel in one request)."""
_BACKSTOP = 5.0


@functools.cache
def _server_source() -> str:
    future = "from __future__ import annotations\n"
    own = [
        Path(__file__).with_name(name).read_text(encoding="utf-8").replace(future, "", 1)
        for name in ("_shell_tests.py", "_shell_server.py")
    ]
    return "\n".join([runner_source(), *own])


_COMPILED: list[str] = []
_COMPILE = (
    "import marshal, sys\n"
    "code = compile(sys.stdin.read(), '<gemgym-shell-server>', 'exec')\n"
    "sys.stdout.buffer.write(marshal.dumps(code))\n"
)


def _compiled_server() -> str:
    """A host file holding the server's code compiled by the sandbox's interpreter (marshal).

    Compiling the server's source takes that interpreter about 0.1 s, most of a session's
    start; it is done once per process and the file bound read-only into each sandbox.
    """
    if _COMPILED and os.path.exists(_COMPILED[0]):
        return _COMPILED[0]
    done = subprocess.run(
        [_SYSTEM_PYTHON, "-I", "-S", "-c", _COMPILE],
        input=_server_source().encode(),
        capture_output=True,
        env=CLEAN_ENV,
        timeout=60,
    )
    if done.returncode != 0:
        raise SandboxError(f"{_SYSTEM_PYTHON} could not compile the shell server: {done.stderr!r}")
    folder = tempfile.mkdtemp(prefix="gemgym-shell-")
    os.chmod(folder, 0o755)  # the sandbox's uid reads it
    path = os.path.join(folder, "server.marshal")
    with open(path, "wb") as f:
        f.write(done.stdout)
    os.chmod(path, 0o644)
    atexit.register(shutil.rmtree, folder, True)
    _COMPILED[:] = [path]
    return path


def _under_system(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in _SYSTEM_DIRS)


@functools.cache
def _gemgym_installs() -> tuple[str, ...]:
    """Where gemgym (its package, its metadata, the venv it runs from) lies on the host.

    Everything gemgym ships (the terminal tasks' tests and reference solutions among it) is
    under these paths; the ones under the system directories are masked in every shell.
    """
    import gemgym

    found = {os.path.dirname(os.path.abspath(gemgym.__file__))}
    found.add(os.path.realpath(next(iter(found))))
    if sys.prefix != sys.base_prefix:  # a virtual environment (one under /usr/local, say)
        found.update({os.path.abspath(sys.prefix), os.path.realpath(sys.prefix)})
    sites = {p for p in sys.path if p and os.path.isdir(p)}
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
        sites.update(glob.glob(pattern))
    for site in sorted(sites):
        try:
            names = os.listdir(site)
        except OSError:
            continue
        for name in names:
            key = name.lower().lstrip("_")
            if key.startswith(("gemgym", "editable__.gemgym", "editable___gemgym")):
                found.add(os.path.join(site, name))
    return tuple(sorted(found))


def _mask_mounts(paths: Sequence[str]) -> list[str]:
    """bubblewrap options covering each of ``paths`` under the system directories with an
    empty read-only ``tmpfs`` (a file: ``/dev/null``); paths elsewhere are not bound at all."""
    mounts: list[str] = []
    masked: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths}):
        if not _under_system(path) or path in _SYSTEM_DIRS or not os.path.exists(path):
            continue
        if any(path.startswith(m + "/") for m in masked):
            continue
        if os.path.isdir(path):
            mounts += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
        else:
            mounts += ["--ro-bind", "/dev/null", path]
        masked.append(path)
    return mounts


def _system_binds_only(argv: list[str]) -> list[str]:
    """``argv`` without the read-only binds of non-system directories (a host venv that
    :func:`~gemgym.sandbox.bwrap.bwrap_argv` binds for a program sandbox's interpreter):
    a shell runs the system's ``/usr/bin/python3`` and sees nothing of the host's Python."""
    keep = {*_SYSTEM_DIRS, "/proc/sys"}
    keep.add(os.path.dirname(os.path.dirname(os.path.realpath(_SYSTEM_PYTHON))))
    out: list[str] = []
    i = 0
    while i < len(argv):
        bind = argv[i] == "--ro-bind" and i + 2 < len(argv) and argv[i + 1] == argv[i + 2]
        if bind and argv[i + 1] not in keep:
            i += 3
            continue
        out.append(argv[i])
        i += 1
    return out


def _read_tests(tests: str | os.PathLike[str]) -> tuple[dict[str, str], list[str]]:
    """The Python modules of a tests directory (relative path -> source) and its other files."""
    modules: dict[str, str] = {}
    others: list[str] = []
    size = 0
    root = Path(tests)
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:  # links are followed
            continue
        rel = path.relative_to(root).as_posix()
        size += path.stat().st_size
        if size > _MAX_TESTS:
            raise ConfigError(
                f"the tests directory {str(tests)!r} holds more than {_MAX_TESTS >> 20} MiB; "
                "keep large data out of tests/"
            )
        if rel.endswith(".py"):
            try:
                modules[rel] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(f"test module {str(path)!r} is not UTF-8 text ({e})") from e
        else:
            others.append(rel)
    return modules, others


@dataclass(frozen=True)
class CommandResult:
    """What one command (or keystroke sequence) did.

    Attributes:
        output: what the terminal showed (stdout and stderr together; head and tail kept when
            it was longer than the session's ``max_output``).
        exit_status: the command's exit status (124: it was stopped at its timeout); ``None``
            when the shell is still busy (keystrokes) or the shell itself exited.
        running: a program started by keystrokes still runs (the shell is not at its prompt).
        killed_by: ``"timeout"`` or ``"output"`` when the command was stopped.
        shell_restarted: the shell exited (``exit``, a signal, ``set -e``) or could not be
            stopped; the next command runs in a new shell (files stay, variables go).
        note: anything else the session has to say.
    """

    output: str
    exit_status: int | None
    running: bool = False
    killed_by: str | None = None
    shell_restarted: bool = False
    note: str | None = None


@dataclass(frozen=True)
class TestReport:
    """The verdicts of a task's hidden tests.

    Attributes:
        passed: names of the tests that passed.
        failed: name -> why, for the others (tests that never ran included): the exception's
            type only (``"AssertionError"``), never the tests' text or expected values.
        error: the tests could not be loaded, or did not finish (timeout).
        output: the last lines the tests printed.
    """

    passed: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    output: str = ""

    @property
    def total(self) -> int:
        """How many tests there were (0 if they could not be loaded)."""
        return len(self.passed) + len(self.failed)

    @property
    def fraction(self) -> float:
        """The fraction of tests that passed (0.0 when there are none)."""
        return len(self.passed) / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """Every test passed, and there was at least one."""
        return self.total > 0 and not self.failed and self.error is None


def decode_keys(text: str) -> bytes:
    r"""Keystrokes from text with escapes: ``\n`` (Enter), ``\t``, ``\r``, ``\e`` (Escape),
    ``\\``, ``\xHH`` (any byte: ``\x03`` is Ctrl-C, ``\x04`` Ctrl-D), and ``^A``-``^Z``
    for control keys (``^C``). Anything else is typed as is (UTF-8)."""
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", "r": b"\r", "e": b"\x1b", "\\": b"\\"}
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if c == "\\" and nxt in simple:
            out += simple[nxt]
            i += 2
        elif c == "\\" and nxt == "x" and len(text) >= i + 4:
            try:
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
            except ValueError:
                out += b"\\"
                i += 1
        elif c == "^" and "A" <= nxt <= "Z":
            out.append(ord(nxt) - 64)
            i += 2
        else:
            out += c.encode("utf-8")
            i += 1
    return bytes(out)


class ShellSession:
    """A shell in a hardened bubblewrap sandbox (see the module docstring).

    Args:
        limits: the sandbox's limits: ``memory`` (the sandbox, and each process),
            ``max_processes``, ``max_file_size``, ``tmp_size`` (``/tmp``), ``cpu_time`` (CPU
            seconds per process, the shell included; default ``timeout`` + 1) and ``timeout``
            (the default per-command wall timeout).
        workspace_size: bytes of the writable workspace (``/app``, a ``tmpfs``).
        tests: a host directory of hidden tests (grading sessions only), read now: its Python
            modules are handed to the test runner in memory by :meth:`run_tests` and never
            appear in the sandbox; its other files (data the tests read) are bound read-only
            at ``/tests``.
        hide: host directories covered with an empty read-only directory inside (gemgym's
            own installation is always covered).
        max_output: bytes of a command's output kept (its head and tail).
        process_limit: ``"cgroup"``, ``"uid"`` or ``"auto"`` (see
            :class:`~gemgym.sandbox.bwrap.ProcessLimiter`).

    Raises:
        SandboxUnavailableError: bubblewrap, user namespaces, libseccomp or
            ``/usr/bin/python3`` are missing here.
        SandboxError: the sandbox did not start.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        workspace_size: int = 128 << 20,
        tests: str | os.PathLike[str] | None = None,
        hide: Sequence[str | os.PathLike[str]] = (),
        max_output: int = 1 << 20,
        process_limit: ProcessLimitMode = "auto",
    ) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError(f"limits must be a gemgym.sandbox.Limits, got {limits!r}")
        self.limits = limits or Limits()
        if isinstance(workspace_size, bool) or not isinstance(workspace_size, int):
            raise ConfigError(f"workspace_size must be a number of bytes, got {workspace_size!r}")
        if workspace_size < 1 << 20:
            raise ConfigError(f"workspace_size must be at least 1 MiB, got {workspace_size}")
        self.max_output = int(max_output)
        if not os.path.exists(_SYSTEM_PYTHON) or not shutil.which("bash", path="/bin:/usr/bin"):
            raise SandboxUnavailableError(
                f"a shell session needs {_SYSTEM_PYTHON} and bash on the host; install them "
                "(Debian/Ubuntu: `apt-get install python3 bash`)"
            )
        limiter = ProcessLimiter(process_limit)
        require_bwrap(limiter.probe_user())
        mounts = ["--size", str(int(workspace_size)), "--tmpfs", WORKSPACE]
        # Debian's `cc`, `awk`, `editor`... are links through /etc/alternatives.
        mounts += ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
        mounts += _mask_mounts([*_gemgym_installs(), *(os.fspath(p) for p in hide)])
        self._copy: str | None = None
        self._tests: dict[str, str] | None = None
        if tests is not None:
            if not os.path.isdir(tests):
                raise ConfigError(f"tests directory {str(tests)!r} does not exist")
            self._tests, others = _read_tests(tests)
            if others:
                mounts += ["--ro-bind", self._copy_tests(tests, others), "/tests"]
        cpu = self.limits.cpu_seconds
        config = {
            "workspace": WORKSPACE,
            "env": dict(CLEAN_ENV),
            "limits": {
                "cpu": cpu,
                "memory": int(self.limits.memory),
                "fsize": int(self.limits.max_file_size),
                "nproc": limiter.nproc(self.limits.max_processes),
            },
        }
        mounts += ["--ro-bind", _compiled_server(), _SERVER_CODE]
        boot = f"import marshal\nexec(marshal.loads(open({_SERVER_CODE!r}, 'rb').read()))\n"
        command = [_SYSTEM_PYTHON, "-I", "-S", "-c", f"{boot}main_shell({config!r})\n"]
        cgroup = limiter.cgroup(self.limits)
        seccomp = seccomp_program()
        try:
            self._server = ServerProcess(
                lambda fds: (
                    _system_binds_only(bwrap_argv(_SYSTEM_PYTHON, self.limits, (), fds[0], mounts))
                    + command
                ),
                extra_fds=[seccomp],
                cgroup=cgroup,
                uid=limiter.user,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            self.close()
            raise
        self.memory_scope = cgroup.memory_scope if cgroup is not None else "process"

    def _copy_tests(self, tests: str | os.PathLike[str], files: Sequence[str]) -> str:
        """A snapshot of the tests' data ``files`` (no Python module) that the sandbox's uid
        can read (the original may sit in a private directory, and must not change)."""
        self._copy = tempfile.mkdtemp(prefix="gemgym-tests-")
        os.chmod(self._copy, 0o755)
        target = os.path.join(self._copy, "tests")
        os.mkdir(target, 0o755)
        for rel in files:
            dest = os.path.join(target, rel)
            os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
            shutil.copyfile(os.path.join(tests, rel), dest)
            os.chmod(dest, 0o644)
        for root, dirs, _ in os.walk(target):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        return target

    # -- requests ----------------------------------------------------------------------------------
    def _request(self, spec: dict[str, Any], wait: float) -> dict[str, Any]:
        if self._server.closed:
            raise SandboxError("this shell session was closed; start a new one")
        try:
            response = self._server.request(spec, wait + _BACKSTOP)
        except (NotStarted, WorkerDied) as e:
            log = self._server.log()
            self.close()
            raise SandboxError(f"the shell sandbox failed: {e}{f' ({log})' if log else ''}") from e
        if "error" in response:
            raise SandboxError(f"the shell sandbox failed: {response['error']}")
        return response

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run ``command`` in the session's shell (its state persists between commands).

        A command still running after ``timeout`` seconds (default: ``limits.timeout``) gets
        ``Ctrl-C`` (then ``SIGKILL``); its result says ``killed_by="timeout"``.
        """
        timeout = self.limits.timeout if timeout is None else float(timeout)
        r = self._request(
            {"op": "cmd", "text": command, "timeout": timeout, "max_output": self.max_output},
            timeout + 4.0,
        )
        return self._result(r)

    def keys(
        self, keys: str | bytes, timeout: float | None = None, quiet: float = 0.3
    ) -> CommandResult:
        """Type keystrokes (``str``: with the escapes of :func:`decode_keys`) into the terminal.

        Returns once the shell is back at its prompt, or nothing was printed for ``quiet``
        seconds (then ``running`` is true: the program waits for more keys), or at ``timeout``.
        """
        data = decode_keys(keys) if isinstance(keys, str) else bytes(keys)
        timeout = self.limits.timeout if timeout is None else float(timeout)
        r = self._request(
            {
                "op": "keys",
                "keys": base64.b64encode(data).decode("ascii"),
                "timeout": timeout,
                "quiet": quiet,
                "max_output": self.max_output,
            },
            timeout + 4.0,
        )
        return self._result(r)

    @staticmethod
    def _result(r: dict[str, Any]) -> CommandResult:
        status = r.get("status")
        return CommandResult(
            output=str(r.get("output", "")),
            exit_status=status if isinstance(status, int) else None,
            running=bool(r.get("running")),
            killed_by=r.get("killed_by"),
            shell_restarted=bool(r.get("shell_exited")),
            note=r.get("note"),
        )

    def execute(self, script: str, timeout: float = 60.0) -> tuple[int | None, str]:
        """Run ``script`` with a non-interactive ``bash -c`` in the workspace (task setup);
        return its exit status and its output (stdout, then stderr)."""
        r = self._request({"op": "exec", "script": script, "timeout": timeout}, timeout)
        status = r.get("status")
        if r.get("reason"):
            status = None
        return (status if isinstance(status, int) else None), str(r["stdout"]) + str(r["stderr"])

    def load(self, archive: bytes) -> None:
        """Unpack a tar ``archive`` into the workspace.

        Raises:
            SandboxError: ``tar`` failed (the archive is broken or the workspace is full).
        """
        r = self._request({"op": "load", "tar": base64.b64encode(archive).decode("ascii")}, 60.0)
        if r.get("status") != 0:
            raise SandboxError(f"the workspace could not be loaded: {r.get('stderr', '')[:500]}")

    def export(self) -> bytes:
        """End the session's processes and return the workspace as a tar archive."""
        r = self._request({"op": "export"}, 60.0)
        if r.get("status") != 0 or r.get("reason"):
            raise SandboxError(f"the workspace could not be saved: {r.get('stderr', '')[:500]}")
        return base64.b64decode(str(r["tar"]))

    def run_tests(self, timeout: float = 60.0) -> TestReport:
        """Run the session's hidden tests (its ``tests=``: the ``test*.py`` modules, their
        ``test*`` functions) in the trusted test runner.

        A failure is reported by the exception's type only (``"AssertionError"``): nothing of
        the tests' text or expected values comes back in :attr:`TestReport.failed`.
        """
        import json

        request = {"op": "test", "timeout": timeout, "modules": self._tests or {}}
        r = self._request(request, timeout)
        names: list[str] = []
        passed: list[str] = []
        failed: dict[str, str] = {}
        error = None
        finished = False
        for line in str(r.get("verdicts", "")).splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            if "error" in item and "test" not in item:
                error = str(item["error"])
            elif isinstance(item.get("total"), list):
                names = [str(n) for n in item["total"]]
            elif item.get("test") in names:
                if item.get("passed") is True:
                    passed.append(str(item["test"]))
                else:
                    failed[str(item["test"])] = str(item.get("error", "failed"))
            elif item.get("done") is True:
                finished = True
        for name in names:
            if name not in passed and name not in failed:
                failed[name] = "did not run (the tests were stopped)"
        if not finished and error is None:
            error = "the tests did not finish" + (f" ({r['reason']})" if r.get("reason") else "")
        if not names and error is None:
            error = "no tests were found"
        return TestReport(tuple(passed), failed, error, str(r.get("output", "")))

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill the sandbox (idempotent)."""
        server = getattr(self, "_server", None)
        if server is not None:
            server.close()
        copy = getattr(self, "_copy", None)
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)
            self._copy = None

    @property
    def closed(self) -> bool:
        """Whether the session was closed (or its sandbox failed)."""
        return self._server.closed

    def __enter__(self) -> ShellSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
