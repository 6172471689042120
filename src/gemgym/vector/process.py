"""The ``process`` backend: worker processes, each hosting several envs, with crash isolation.

Layout: env ``i`` lives in worker ``i * num_workers // num_envs`` (contiguous blocks). A vector step
sends one message per worker holding the actions of all its envs, and the workers run in parallel.

Crash isolation (shared with the ``ray`` backend, see :mod:`gemgym.vector._hosted`): a worker that
dies (segfault, ``os._exit``, out-of-memory kill) or takes longer than ``step_timeout`` seconds for
one step is killed (with its process group) and restarted, and its envs are rebuilt and reported
once as ``truncated=True`` with ``info["worker_error"]``. An exception raised by an env is not a
crash: it is re-raised in the parent, with the worker's traceback as a note, and the worker stays
up.

Messages: a vector step sends each worker one pickled message with the actions of its block and
gets back one reply with five columns. On Linux x86 they pass through shared memory (one file
per worker, see :mod:`gemgym.vector._channel`), elsewhere through the worker's pipe; either way
the waiting side polls for up to ``busy_poll`` seconds before sleeping on the pipe (see
:class:`ProcessVectorEnv`), while waits stay short.

Workers never outlive the parent: they ask the kernel for SIGKILL when their parent dies
(``PR_SET_PDEATHSIG`` on Linux) and also watch the parent's pid and their pipe. They are started
with ``forkserver`` (safe with threads, and cheap: the server has imported gemgym already), or
``spawn`` where forkserver does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from gemgym.errors import VectorEnvError
from gemgym.vector._channel import (
    PipeChannel,
    SharedMemoryChannel,
    create_shared_file,
    shared_memory_supported,
)
from gemgym.vector._group import EnvGroup, StepTuple
from gemgym.vector._hosted import Host, HostedVectorEnv, HostLost
from gemgym.vector.base import AutoresetMode, EnvRecipe, ResetItem

__all__ = ["ProcessVectorEnv"]

_PR_SET_PDEATHSIG = 1
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_SHM_CAPACITY = 1 << 18  # bytes per direction of a worker's shared memory; more goes by pipe
Channel = PipeChannel | SharedMemoryChannel


# -- worker side --------------------------------------------------------------------------------
def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent dies, even when this worker is stuck in an env's code."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def watch() -> None:  # portable fallback (and covers a forkserver parent)
        while True:
            time.sleep(0.5)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pragma: no cover - pid reused by another user
                os._exit(1)

    threading.Thread(target=watch, name="gemgym-parent-watch", daemon=True).start()


def _pack_error(e: BaseException) -> tuple[bytes | None, str, str]:
    tb = traceback.format_exc()
    blob: bytes | None
    try:
        blob = pickle.dumps(e)
        pickle.loads(blob)
    except Exception:
        blob = None
    return blob, f"{type(e).__name__}: {e}", tb


_COMMANDS = frozenset({"step", "reset", "call"})


def _worker_main(
    conn: Connection,
    recipes: list[EnvRecipe],
    mode: AutoresetMode,
    first: int,
    needs_reset: bool,
    parent_pid: int,
    seeds: list[int | None] | None = None,
    spin_s: float = 0.0,
    shm_path: str | None = None,
) -> None:
    """The loop of one worker process: it answers the commands of its :class:`EnvGroup`."""
    with contextlib.suppress(OSError):
        os.setpgrp()  # its own process group: terminal Ctrl-C goes to the parent only
    _die_with_parent(parent_pid)
    chan: Channel
    if shm_path is None:
        chan = PipeChannel(conn, spin_s)
    else:
        chan = SharedMemoryChannel(conn, shm_path, _SHM_CAPACITY, parent=False, spin_s=spin_s)
    dumps, loads, send, recv = pickle.dumps, pickle.loads, chan.send, chan.recv
    try:
        group = EnvGroup.build(recipes, mode, first=first, needs_reset=needs_reset, seeds=seeds)
    except BaseException as e:
        send(dumps(("error", _pack_error(e)), _PROTOCOL))
        return
    send(dumps(("ok", os.getpid()), _PROTOCOL))
    columns = group.columns
    while True:
        try:
            cmd, payload = loads(recv(None))  # type: ignore[arg-type]  # None only on timeout
        except (EOFError, OSError, KeyboardInterrupt):
            break
        try:
            if cmd == "columns":  # one action per env of this worker, in order: the hot path
                out: Any = columns(payload)
            elif cmd in _COMMANDS:
                out = getattr(group, cmd)(payload)
            elif cmd == "close":
                with contextlib.suppress(Exception):
                    group.close()
                send(dumps(("ok", None), _PROTOCOL))
                break
            else:  # pragma: no cover - internal protocol
                raise VectorEnvError(f"unknown command {cmd!r}")
            send(dumps(("ok", out), _PROTOCOL))
        except BaseException as e:
            send(dumps(("error", _pack_error(e)), _PROTOCOL))


# -- parent side --------------------------------------------------------------------------------
class _Worker(Host):
    """The parent's record of one worker: its process, channel and shared memory file."""

    def __init__(self, index: int, lo: int, hi: int) -> None:
        super().__init__(index, lo, hi)
        self.process: Any = None
        self.chan: Channel | None = None
        self.shm_path: str | None = None  # removed once the worker has mapped it


class ProcessVectorEnv(HostedVectorEnv[_Worker]):
    """Envs in worker processes: true parallelism for CPU-bound envs, and crash isolation.

    Args:
        recipes: one :class:`~gemgym.vector.base.EnvRecipe` per env. Envs are built inside the
            workers, so wrappers and factories must be picklable (module-level callables or
            :func:`functools.partial` of them; not lambdas).
        autoreset_mode: see :class:`~gemgym.vector.AutoresetMode`.
        num_workers: worker processes (default: one per CPU core, at most one per env).
        step_timeout: seconds one worker may take for one (batched) step before it is killed
            and restarted; ``None`` waits forever (a dead worker is still detected).
        start_method: ``"forkserver"`` (default on Linux) or ``"spawn"``; ``"fork"`` is refused
            (unsafe once the parent has threads).
        start_timeout: seconds to wait for a worker to build its envs.
        busy_poll: seconds a waiting side polls its pipe before it sleeps (default 1 ms; 0
            never polls). Waking a sleeping process can cost as much as a batch of a cheap
            game, so polling brings a cheap game's ``process`` steps closer to ``sync``'s speed
            (measured figures: docs/benchmarks.md). Polling yields the core
            between polls and stops after a wait longer than ``busy_poll`` (slow envs, or a
            parent busy generating), so it costs nothing where it cannot help.
        shared_memory: pass messages through shared memory instead of the pipe (``None``, the
            default: where it is safe, Linux on x86). The waiting side then polls a sequence
            number in memory, with no system call in a message's way; the pipe still wakes a
            side that sleeps, carries messages over 256 KiB and reports a dead worker. A round
            trip is several times faster than through the pipe, and a cheap game's steps come
            closer to ``sync``'s speed (measured figures: docs/benchmarks.md).

    Attributes:
        restarts: how many times a worker was restarted.
    """

    backend = "process"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        num_workers: int | None = None,
        step_timeout: float | None = None,
        start_method: str | None = None,
        start_timeout: float = 120.0,
        busy_poll: float = 0.001,
        shared_memory: bool | None = None,
    ) -> None:
        if busy_poll < 0:
            raise VectorEnvError(f"busy_poll must be >= 0 seconds, got {busy_poll}")
        if shared_memory and not shared_memory_supported():
            raise VectorEnvError(
                "shared_memory=True needs Linux on x86 (its memory order); "
                "use shared_memory=None to fall back to pipes elsewhere"
            )
        method = start_method or (
            "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        )
        if method == "fork":
            raise VectorEnvError("start_method='fork' is unsafe with threads; use forkserver/spawn")
        workers = num_workers if num_workers is not None else (os.cpu_count() or 1)
        self._init_hosts(recipes, autoreset_mode, workers, step_timeout)
        self.busy_poll = busy_poll
        self.shared_memory = shared_memory_supported() if shared_memory is None else shared_memory
        self.start_timeout = start_timeout
        self._ctx = mp.get_context(method)
        if method == "forkserver":
            self._ctx.set_forkserver_preload(["gemgym.vector.process"])
        self._executor: ThreadPoolExecutor | None = None
        self._start_hosts()

    @property
    def _workers(self) -> list[_Worker]:
        return self._hosts

    # -- transport -------------------------------------------------------------------------------
    def _new_host(self, index: int, lo: int, hi: int) -> _Worker:
        return _Worker(index, lo, hi)

    def _start(self, host: _Worker, needs_reset: bool, seeds: list[int | None] | None) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        recipes = [self.recipes[i] for i in host.env_indices]
        path = None
        if self.shared_memory:
            with contextlib.suppress(OSError):  # no room in /dev/shm: this worker uses its pipe
                path = create_shared_file(_SHM_CAPACITY)
        proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=_worker_main,
            args=(
                child_conn,
                recipes,
                self.autoreset_mode,
                host.lo,
                needs_reset,
                os.getpid(),
                seeds,
                self.busy_poll,
                path,
            ),
            name=f"gemgym-vec-worker-{host.index}",
            daemon=True,
        )
        host.shm_path = path
        try:
            proc.start()
        finally:
            child_conn.close()
        host.process = proc  # only a started process: a failed start leaves nothing to join
        host.chan = (
            PipeChannel(parent_conn, self.busy_poll)
            if path is None
            else SharedMemoryChannel(parent_conn, path, _SHM_CAPACITY, True, self.busy_poll)
        )

    def _await_ready(self, host: _Worker) -> None:
        try:
            self._recv(host, None, time.monotonic() + self.start_timeout, "starting")
        except HostLost as e:
            raise VectorEnvError(
                f"worker {host.index} ({self._ids_of(host)}) could not start: {e}; its own error, "
                "if any, is printed above. A script that makes a 'process' vector env when it is "
                'imported needs an `if __name__ == "__main__":` guard: each worker imports the '
                "main module (forkserver/spawn)"
            ) from None
        finally:
            self._unlink(host)  # mapped by both sides (or never to be)

    @staticmethod
    def _unlink(wk: _Worker) -> None:
        if wk.shm_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(wk.shm_path)
            wk.shm_path = None

    def _stop(self, host: _Worker) -> None:
        proc = host.process
        if proc is not None and proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and whatever its envs started
            except OSError:
                proc.kill()
        if proc is not None:
            proc.join(5)
        if host.chan is not None:
            host.chan.close()
        self._unlink(host)
        host.process, host.chan = None, None

    def _send(self, host: _Worker, cmd: str, payload: Any) -> None:
        chan = host.chan
        if chan is None:
            raise HostLost("worker is not running")
        try:
            chan.send(pickle.dumps((cmd, payload), _PROTOCOL))
        except (BrokenPipeError, ConnectionResetError, EOFError) as e:
            raise HostLost(f"worker process died ({self._exit_status(host)})") from e

    def _exit_status(self, host: _Worker) -> str:
        proc = host.process
        if proc is None:
            return "not running"
        proc.join(1)
        code = proc.exitcode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def _recv(self, host: _Worker, ticket: Any, deadline: float | None, what: str) -> Any:
        chan = host.chan
        if chan is None:
            raise HostLost("worker is not running")
        try:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            data = chan.recv(timeout)
            if data is None:
                limit = self.step_timeout if what != "starting" else self.start_timeout
                raise HostLost(f"no reply within {limit} s while {what}")
            status, payload = pickle.loads(data)
        except (EOFError, OSError) as e:
            raise HostLost(f"worker process died while {what} ({self._exit_status(host)})") from e
        if status == "error":
            blob, text, tb = payload
            exc: BaseException
            try:
                exc = pickle.loads(blob) if blob is not None else VectorEnvError(text)
            except Exception:
                exc = VectorEnvError(text)
            exc.add_note(f"raised in worker {host.index} ({self._ids_of(host)}):\n{tb}")
            raise exc
        return payload

    # -- asyncio and closing ---------------------------------------------------------------------
    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                min(max(self.num_envs, 4), 256), thread_name_prefix="gemgym-vec-async"
            )
        return self._executor

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        # the waiting happens in a thread; calls on envs of different workers run concurrently
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._step_items, items)

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._reset_items, items)

    def _close(self) -> None:
        for wk in self._workers:
            with wk.lock:
                if wk.chan is not None:
                    with contextlib.suppress(HostLost, OSError, VectorEnvError):
                        self._send(wk, "close", None)
        for wk in self._workers:
            with wk.lock:
                if wk.chan is not None:
                    with contextlib.suppress(Exception):
                        wk.chan.recv(5)
                    if wk.process is not None:
                        wk.process.join(5)
                self._stop(wk)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the live worker processes."""
        return [wk.process.pid for wk in self._workers if wk.process is not None]
