"""The sandbox interface: :class:`Limits`, :class:`RunResult` and :class:`Sandbox`."""

from __future__ import annotations

import abc
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from gemgym.errors import ClosedError, ConfigError

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "KillReason",
    "Limits",
    "MemoryScope",
    "MemoryScopeRequest",
    "RunRequest",
    "RunResult",
    "Sandbox",
]

KillReason = Literal["timeout", "cpu", "memory", "output", "file_size", "processes", "open_files"]
"""Which limit ended a run."""

MemoryScope = Literal["sandbox", "process"]
"""What ``Limits.memory`` bounded in a run: the whole sandbox (a memory cgroup), or each process
(``RLIMIT_AS`` only, where no memory cgroup could be made)."""

MemoryScopeRequest = Literal["auto", "sandbox", "process"]
"""What ``Limits.memory`` must bound: ``"sandbox"`` (the whole sandbox, or the sandbox raises),
``"process"`` (each process is enough: the weaker scope, chosen explicitly), or ``"auto"``
(the default: the whole sandbox where gemgym runs as root, which can always make a memory
cgroup, so a sandbox that cannot raises; each process where it does not run as root, where no
process can make one, and every :class:`RunResult` says ``memory_scope="process"``)."""

_GiB = 1 << 30
_MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every run.

    Attributes:
        timeout: wall-clock seconds; the whole process tree is killed when it passes.
        cpu_time: CPU seconds per process (``RLIMIT_CPU``); ``None`` = ``ceil(timeout) + 1``.
        memory: bytes of memory for the whole sandbox (a memory cgroup, as root) and per
            process (``RLIMIT_AS``, always).
        max_processes: processes and threads alive at once in the sandbox (a ``pids`` cgroup,
            or ``RLIMIT_NPROC`` for a non-root uid).
        max_output: bytes of stdout + stderr kept; a run that writes more is killed.
        max_file_size: largest file a run may write (``RLIMIT_FSIZE``).
        tmp_size: size of the private writable ``/tmp`` (bubblewrap and Docker backends).
        memory_scope: what ``memory`` must bound (see :data:`MemoryScopeRequest`).
        max_open_files: ``RLIMIT_NOFILE`` of each process; ``None``: so that the whole sandbox
            holds at most 1 % of the host's ``fs.file-max`` descriptors (between 32 and 1024).
    """

    timeout: float = 10.0
    cpu_time: float | None = None
    memory: int = 2 * _GiB
    max_processes: int = 64
    max_output: int = 1 * _MiB
    max_file_size: int = 16 * _MiB
    tmp_size: int = 64 * _MiB
    memory_scope: MemoryScopeRequest = "auto"
    max_open_files: int | None = None

    def __post_init__(self) -> None:
        for name in ("timeout", "memory", "max_processes", "max_output", "max_file_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"Limits.{name} must be a positive number, got {value!r}")
        if self.cpu_time is not None and self.cpu_time <= 0:
            raise ConfigError(f"Limits.cpu_time must be positive or None, got {self.cpu_time!r}")
        if self.memory_scope not in ("auto", "sandbox", "process"):
            raise ConfigError(
                "Limits.memory_scope must be 'auto', 'sandbox' or 'process', got "
                f"{self.memory_scope!r}"
            )
        files = self.max_open_files
        if files is not None and (
            isinstance(files, bool) or not isinstance(files, int) or files < 8
        ):
            raise ConfigError(f"Limits.max_open_files must be an int >= 8 or None, got {files!r}")

    @property
    def cpu_seconds(self) -> int:
        """The CPU-time limit in whole seconds."""
        if self.cpu_time is not None:
            return max(1, math.ceil(self.cpu_time))
        return math.ceil(self.timeout) + 1

    def with_timeout(self, timeout: float | None) -> Limits:
        """These limits with another wall timeout (``None`` keeps this one)."""
        return self if timeout is None else replace(self, timeout=timeout)


@dataclass(frozen=True)
class RunRequest:
    """One snippet to run.

    Attributes:
        code: Python source, run as ``__main__`` (like ``python -c``).
        stdin: text fed to the program's standard input.
        setup: code run first in the same namespace with its output discarded (used to replay
            the earlier cells of a persistent interpreter).
        check: hidden tests (trusted code). They run in a separate, trusted process of the
            sandbox against proxies of the program's top-level names: each call is made in the
            program's process and only plain values (``None``, ``bool``, ``int``, ``float``,
            ``complex``, ``str``, ``bytes``, and lists, tuples, dicts, sets, frozensets of them)
            come back, so nothing the program does can make them pass except returning the
            right values. :attr:`RunResult.check_passed` says whether they ran to completion.
        files: files written to the working directory first (name -> text).
        timeout: wall timeout of this run (``None``: the sandbox's limit).
        prefix: trusted code run before ``code`` in the program and before ``check`` in the
            test process (HumanEval's prompt: imports and helper functions); in the tests, the
            names it defines are the trusted ones, except ``entry_point``.
        entry_point: the name under test, taken from the program even when ``prefix``
            defines it.
    """

    code: str
    stdin: str = ""
    setup: str | None = None
    check: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    prefix: str = ""
    entry_point: str | None = None

    def spec(self, limits: Limits, nproc: int | None) -> dict[str, Any]:
        """The JSON run spec understood by the in-sandbox runner."""
        return {
            "code": self.code,
            "stdin": self.stdin,
            "setup": self.setup,
            "check": self.check,
            "prefix": self.prefix,
            "entry_point": self.entry_point,
            "files": dict(self.files),
            "timeout": limits.timeout,
            "cpu": limits.cpu_seconds,
            "memory": int(limits.memory),
            "fsize": int(limits.max_file_size),
            "nproc": nproc,
            "nofile": limits.max_open_files,
            "max_output": int(limits.max_output),
        }


@dataclass(frozen=True)
class RunResult:
    """What a run produced.

    Attributes:
        stdout: standard output (UTF-8, invalid bytes replaced; cut at the output limit).
        stderr: standard error, the same way.
        exit_code: the exit status; negative = killed by that signal; ``None`` if it never ran.
        timed_out: the wall timeout passed.
        killed_by: the limit that ended the run, if one did.
        duration: wall seconds.
        check_passed: for requests with a ``check``: whether the tests ran to completion (decided
            by the trusted test process, never by the program).
        error: the sandbox itself failed (not the code); the run did not complete.
        check_error: for a failed ``check``: why (the test's exception, in one line).
        memory_scope: what ``Limits.memory`` bounded (see :data:`MemoryScope`).
        notes: what else the sandbox has to say about the run (e.g. that the worker could not
            be verified clean afterwards and was replaced).
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    killed_by: KillReason | None = None
    duration: float = 0.0
    check_passed: bool | None = None
    error: str | None = None
    check_error: str | None = None
    memory_scope: MemoryScope = "process"
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The program exited with status 0 within its limits."""
        return self.exit_code == 0 and self.killed_by is None and self.error is None


_SIGXCPU = 24
_SIGXFSZ = 25


def failed_result(error: str, memory_scope: MemoryScope = "process") -> RunResult:
    """The result of a run that the sandbox could not complete."""
    return RunResult("", "", None, error=error, memory_scope=memory_scope)


def result_from_response(
    response: Mapping[str, Any],
    *,
    process_limit_hit: bool = False,
    oom_killed: bool = False,
    memory_scope: MemoryScope = "process",
    notes: tuple[str, ...] = (),
) -> RunResult:
    """Turn the fork-server's response to a run into a :class:`RunResult` (every backend).

    The program's own output never decides ``check_passed``: it comes from the trusted test
    process's verdict, which the server reads from a pipe only that process holds.
    """
    if "error" in response:
        return failed_result(str(response["error"]), memory_scope)
    exit_code = response.get("exit_code")
    exit_code = exit_code if isinstance(exit_code, int) else None
    reason = response.get("reason")
    killed: KillReason | None = None
    if reason == "timeout":
        killed = "timeout"
    elif reason == "output":
        killed = "output"
    elif reason == "open_files":  # the run held more files than its share of the host's
        killed = "open_files"
        notes = (*notes, str(response.get("note") or "open files limit"))
    elif exit_code == -_SIGXCPU:
        killed = "cpu"
    elif exit_code == -_SIGXFSZ:
        killed = "file_size"
    elif oom_killed or (exit_code == 1 and response.get("memory_error")):
        killed = "memory"
    elif process_limit_hit and exit_code != 0:
        killed = "processes"
    check = response.get("check")
    check_passed = check_error = None
    if isinstance(check, Mapping):
        check_passed = check.get("passed") is True
        error = check.get("error")
        check_error = str(error) if error and not check_passed else None
    return RunResult(
        stdout=str(response.get("stdout", "")),
        stderr=str(response.get("stderr", "")),
        exit_code=exit_code,
        timed_out=killed == "timeout",
        killed_by=killed,
        duration=float(response.get("duration", 0.0)),
        check_passed=check_passed,
        check_error=check_error,
        memory_scope=memory_scope,
        notes=notes,
    )


class Sandbox(abc.ABC):
    """Runs untrusted Python code under :class:`Limits`.

    Subclasses implement :meth:`_run`. Use :func:`gemgym.sandbox.make_sandbox` to build one.
    Every method is thread-safe; :meth:`run_many` runs requests in parallel.
    """

    name: str = "sandbox"
    isolating: bool = True
    """Whether the backend isolates the filesystem, network and processes (not: unsafe-local)."""

    def __init__(self, limits: Limits | None = None, parallelism: int = 2) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError(f"limits must be a gemgym.sandbox.Limits, got {limits!r}")
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise ConfigError(f"parallelism must be a positive int, got {parallelism!r}")
        self.limits = limits or Limits()
        self.parallelism = parallelism
        self._closed = False
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._args: tuple[Any, ...] = (self.limits, parallelism)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies (pickle, deepcopy) are new sandboxes with the same settings."""
        return (type(self), self._args)

    def run(
        self,
        code: str | RunRequest,
        stdin: str = "",
        *,
        timeout: float | None = None,
        setup: str | None = None,
        check: str | None = None,
        files: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``code`` (a source string or a :class:`RunRequest`) and return its result."""
        if self._closed:
            raise ClosedError(f"this {self.name} sandbox was closed; make a new one")
        if isinstance(code, RunRequest):
            request = code
        elif isinstance(code, str):
            request = RunRequest(code, stdin, setup, check, files or {}, timeout)
        else:
            raise ConfigError(f"code must be a str or RunRequest, got {type(code).__name__}")
        return self._run(request, self.limits.with_timeout(request.timeout))

    def run_many(self, requests: Iterable[RunRequest]) -> list[RunResult]:
        """Run several requests in parallel (up to :attr:`parallelism` at once), in order."""
        items = list(requests)
        if len(items) <= 1 or self.parallelism == 1:
            return [self.run(r) for r in items]
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.parallelism, f"gemgym-{self.name}")
            executor = self._executor
        return list(executor.map(self.run, items))

    @abc.abstractmethod
    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        """Run one request under ``limits``."""

    def warm_up(self) -> None:
        """Start now what the first run would start (the pool backend's workers), so that no
        run waits for it. Idempotent and thread-safe; the default does nothing."""

    def close(self) -> None:
        """Stop workers and release resources (idempotent)."""
        self._closed = True
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.limits}>"
