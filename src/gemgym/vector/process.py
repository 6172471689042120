"""The ``process`` backend: worker processes, each hosting several envs, with crash isolation.

Layout: env ``i`` lives in worker ``i * num_workers // num_envs`` (contiguous blocks). A vector step
sends one message per worker holding the actions of all its envs, and the workers run in parallel.

Crash isolation: a worker that dies (segfault, ``os._exit``, out-of-memory kill) or takes longer than
``step_timeout`` seconds for one step is killed and restarted, and its envs are rebuilt. Each of them
is then reported once as ``truncated=True``, reward 0, with ``info["worker_error"]`` saying what
happened; the other workers' results come back as usual. A rebuilt env that was reset with a seed
before gets a seed derived from that one and the restart count for its next unseeded reset, so a
seeded run stays reproducible through a loss at the same step. After a loss:

* ``SAME_STEP``: the env was reset at once; the observation is the first of the new episode, and
  ``info["final_obs"]`` is ``None``.
* ``NEXT_STEP``: the observation is ``None``; the next step resets the env (as after any episode end).
* ``DISABLED``: the observation is ``None``; reset the env yourself.

An env of the lost worker that was not in the current step is reported on its next step. An
exception raised by an env is not a crash: it is re-raised in the parent, with the worker's
traceback as a note, and the worker stays up.

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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from gemgym.errors import VectorEnvError
from gemgym.vector._channel import (
    PipeChannel,
    SharedMemoryChannel,
    create_shared_file,
    shared_memory_supported,
)
from gemgym.vector.base import (
    BOOL,
    FLOAT,
    AutoresetMode,
    Columns,
    EnvRecipe,
    EnvSlot,
    ResetItem,
    SlotBatch,
    StepTuple,
    VecStep,
    VectorEnv,
    group_items,
)

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


def _worker_main(
    conn: Connection,
    recipes: list[EnvRecipe],
    mode: AutoresetMode,
    needs_reset: bool,
    parent_pid: int,
    seeds: list[int | None] | None = None,
    spin_s: float = 0.0,
    shm_path: str | None = None,
) -> None:
    """The loop of one worker process."""
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
        seeds = seeds or [None] * len(recipes)
        slots = [
            EnvSlot(r.build(), mode, needs_reset, s) for r, s in zip(recipes, seeds, strict=True)
        ]
        batch = SlotBatch(slots, mode)
    except BaseException as e:
        send(dumps(("error", _pack_error(e)), _PROTOCOL))
        return
    send(dumps(("ok", os.getpid()), _PROTOCOL))
    while True:
        try:
            cmd, payload = loads(recv(None))  # type: ignore[arg-type]  # None only on timeout
        except (EOFError, OSError, KeyboardInterrupt):
            break
        try:
            if cmd == "stepall":  # one action per env of this worker, in order: the hot path
                # sent as five columns (and two flags): fewer objects to pickle than N tuples
                out: Any = batch.columns(payload)
            elif cmd == "step":
                try:
                    out = [slots[j].step(a) for j, a in payload]
                except BaseException:
                    batch.forget()  # an env may be left ended
                    raise
            elif cmd == "reset":
                out = [slots[j].reset(s, o) for j, s, o in payload]
            elif cmd == "call":
                batch.forget()  # the call may step or reset the envs
                name, args = payload
                out = [s.call(name, args) for s in slots]
            elif cmd == "close":
                for s in slots:
                    with contextlib.suppress(Exception):
                        s.env.close()
                send(dumps(("ok", None), _PROTOCOL))
                break
            else:  # pragma: no cover - internal protocol
                raise VectorEnvError(f"unknown command {cmd!r}")
            send(dumps(("ok", out), _PROTOCOL))
        except BaseException as e:
            send(dumps(("error", _pack_error(e)), _PROTOCOL))


# -- parent side --------------------------------------------------------------------------------
class _WorkerLost(Exception):
    """A worker died or timed out; the message says which."""


class _Worker:
    """The parent's record of one worker: process, pipe, lock, and reports owed to its envs."""

    def __init__(self, index: int, env_indices: list[int]) -> None:
        self.index = index
        self.env_indices = env_indices  # a contiguous block
        self.lo = env_indices[0] if env_indices else 0
        self.hi = self.lo + len(env_indices)
        self.lock = threading.Lock()
        self.process: Any = None
        self.chan: Channel | None = None
        self.shm_path: str | None = None  # removed once the worker has mapped it
        self.pending: dict[int, StepTuple] = {}  # local index -> loss report owed


class ProcessVectorEnv(VectorEnv):
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
            never polls). Waking a sleeping process costs tens of µs on a virtual machine, as
            much as a batch of a cheap game: with polling, N = 64 GuessTheNumber steps went
            from 0.6x to 0.8x ``sync``'s speed (docs/benchmarks.md). Polling yields the core
            between polls and stops after a wait longer than ``busy_poll`` (slow envs, or a
            parent busy generating), so it costs nothing where it cannot help.
        shared_memory: pass messages through shared memory instead of the pipe (``None``, the
            default: where it is safe, Linux on x86). The waiting side then polls a sequence
            number in memory, with no system call in a message's way; the pipe still wakes a
            side that sleeps, carries messages over 256 KiB and reports a dead worker. A round
            trip took 3.9 µs instead of 22.7 µs, and N = 64 GuessTheNumber steps went from
            0.68x to 0.79-0.89x ``sync``'s speed (docs/benchmarks.md).

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
        self._init_common(recipes, autoreset_mode)
        if busy_poll < 0:
            raise VectorEnvError(f"busy_poll must be >= 0 seconds, got {busy_poll}")
        self.busy_poll = busy_poll
        if shared_memory and not shared_memory_supported():
            raise VectorEnvError(
                "shared_memory=True needs Linux on x86 (its memory order); "
                "use shared_memory=None to fall back to pipes elsewhere"
            )
        self.shared_memory = shared_memory_supported() if shared_memory is None else shared_memory
        n = self.num_envs
        w = num_workers if num_workers is not None else (os.cpu_count() or 1)
        if w < 1:
            raise VectorEnvError(f"num_workers must be at least 1, got {w}")
        w = min(w, n)
        if step_timeout is not None and step_timeout <= 0:
            raise VectorEnvError(f"step_timeout must be positive seconds, got {step_timeout}")
        self.step_timeout = step_timeout
        self.start_timeout = start_timeout
        self.restarts = 0
        method = start_method or (
            "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        )
        if method == "fork":
            raise VectorEnvError("start_method='fork' is unsafe with threads; use forkserver/spawn")
        self._ctx = mp.get_context(method)
        if method == "forkserver":
            self._ctx.set_forkserver_preload(["gemgym.vector.process"])
        self._where: list[tuple[int, int]] = [(0, 0)] * n
        self._workers: list[_Worker] = []
        for k in range(w):
            members = [i for i in range(n) if i * w // n == k]
            for j, i in enumerate(members):
                self._where[i] = (k, j)
            self._workers.append(_Worker(k, members))
        self._executor: ThreadPoolExecutor | None = None
        try:
            for wk in self._workers:
                self._spawn(wk, needs_reset=False)
            for wk in self._workers:
                self._await_ready(wk)
        except BaseException:
            self._closed = True
            self._kill_all()
            raise

    # -- worker lifecycle ------------------------------------------------------------------
    def _spawn(self, wk: _Worker, needs_reset: bool, seeds: list[int | None] | None = None) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        recipes = [self.recipes[i] for i in wk.env_indices]
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
                needs_reset,
                os.getpid(),
                seeds,
                self.busy_poll,
                path,
            ),
            name=f"gemgym-vec-worker-{wk.index}",
            daemon=True,
        )
        wk.shm_path = path
        try:
            proc.start()
        finally:
            child_conn.close()
        wk.process = proc  # only a started process: a failed start leaves nothing to join
        wk.chan = (
            PipeChannel(parent_conn, self.busy_poll)
            if path is None
            else SharedMemoryChannel(parent_conn, path, _SHM_CAPACITY, True, self.busy_poll)
        )

    def _await_ready(self, wk: _Worker) -> None:
        try:
            self._recv(wk, time.monotonic() + self.start_timeout, "starting")
        except _WorkerLost as e:
            raise VectorEnvError(
                f"worker {wk.index} ({self._ids_of(wk)}) could not start: {e}; its own error, "
                "if any, is printed above. A script that makes a 'process' vector env when it is "
                'imported needs an `if __name__ == "__main__":` guard: each worker imports the '
                "main module (forkserver/spawn)"
            ) from None
        finally:
            self._unlink(wk)  # mapped by both sides (or never to be)

    @staticmethod
    def _unlink(wk: _Worker) -> None:
        if wk.shm_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(wk.shm_path)
            wk.shm_path = None

    def _ids_of(self, wk: _Worker) -> str:
        return ", ".join(sorted({self.env_ids[i] for i in wk.env_indices}))

    def _kill(self, wk: _Worker) -> None:
        proc = wk.process
        if proc is not None and proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and whatever its envs started
            except OSError:
                proc.kill()
        if proc is not None:
            proc.join(5)
        if wk.chan is not None:
            wk.chan.close()
        self._unlink(wk)
        wk.process, wk.chan = None, None

    def _kill_all(self) -> None:
        for wk in self._workers:
            self._kill(wk)

    def _recover(self, wk: _Worker, reason: str) -> None:
        """Replace a lost worker; owe every one of its envs a truncation report."""
        self._kill(wk)
        self.restarts += 1
        mode = self.autoreset_mode
        seeds = self._restart_seeds(wk.env_indices, self.restarts)
        self._spawn(wk, needs_reset=mode is AutoresetMode.NEXT_STEP, seeds=seeds)
        self._await_ready(wk)
        msg = f"worker {wk.index} was restarted: {reason}; this env's episode was cut short"
        if mode is AutoresetMode.SAME_STEP:
            local = list(range(len(wk.env_indices)))
            self._send(wk, ("reset", [(j, None, None) for j in local]))
            fresh = self._recv(wk, self._deadline(), "resetting after a restart")
            for j, (obs, info) in zip(local, fresh, strict=True):
                full = {**info, "worker_error": msg, "final_obs": None}
                full["final_info"] = {"worker_error": msg}
                wk.pending[j] = (obs, 0.0, False, True, full)
        else:
            for j in range(len(wk.env_indices)):
                wk.pending[j] = (None, 0.0, False, True, {"worker_error": msg})

    # -- messaging --------------------------------------------------------------------------
    def _deadline(self) -> float | None:
        return None if self.step_timeout is None else time.monotonic() + self.step_timeout

    def _send(self, wk: _Worker, msg: Any) -> None:
        if wk.chan is None:
            raise _WorkerLost("worker is not running")
        try:
            wk.chan.send(pickle.dumps(msg, _PROTOCOL))
        except (BrokenPipeError, ConnectionResetError, EOFError) as e:
            raise _WorkerLost(f"worker process died ({self._exit_status(wk)})") from e

    def _exit_status(self, wk: _Worker) -> str:
        proc = wk.process
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

    def _recv(self, wk: _Worker, deadline: float | None, what: str) -> Any:
        chan = wk.chan
        if chan is None:
            raise _WorkerLost("worker is not running")
        try:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            data = chan.recv(timeout)
            if data is None:
                limit = self.step_timeout if what != "starting" else self.start_timeout
                raise _WorkerLost(f"no reply within {limit} s while {what}")
            status, payload = pickle.loads(data)
        except (EOFError, OSError) as e:
            raise _WorkerLost(f"worker process died while {what} ({self._exit_status(wk)})") from e
        if status == "error":
            blob, text, tb = payload
            exc: BaseException
            try:
                exc = pickle.loads(blob) if blob is not None else VectorEnvError(text)
            except Exception:
                exc = VectorEnvError(text)
            exc.add_note(f"raised in worker {wk.index} ({self._ids_of(wk)}):\n{tb}")
            raise exc
        return payload

    def _groups(self, items: Sequence[tuple[int, Any]]) -> dict[int, list[tuple[int, int, Any]]]:
        return group_items(self._where, items)

    # -- backend hooks -------------------------------------------------------------------------
    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        workers = self._workers
        if (
            type(actions) is not list
            or len(actions) != self.num_envs
            or self._closed
            or any(wk.pending for wk in workers)
        ):
            return super().step(actions)  # partial steps, owed reports, checks and errors
        # the hot path: one "stepall" message per worker with its block of actions; each reply
        # is five columns (obs, rewards, terminated, truncated, infos) for the worker's block
        for wk in workers:
            wk.lock.acquire()
        try:
            parts: list[Any] = [None] * len(workers)
            sent: list[_Worker] = []
            for wk in workers:
                try:
                    self._send(wk, ("stepall", actions[wk.lo : wk.hi]))
                    sent.append(wk)
                except _WorkerLost as e:
                    parts[wk.index] = self._lost_block(wk, actions, str(e))
            deadline = self._deadline()
            error: BaseException | None = None
            for wk in sent:
                try:
                    parts[wk.index] = self._recv(wk, deadline, "stepping")
                except _WorkerLost as e:
                    parts[wk.index] = self._lost_block(wk, actions, str(e))
                except Exception as e:  # an env raised: read the other replies, then raise
                    error = error or e
            if error is not None:
                raise error
        finally:
            for wk in workers:
                wk.lock.release()
        return self._merge(parts)

    def _merge(self, parts: list[Columns]) -> VecStep:
        """The batched 5-tuple from the workers' replies, in env order; a flag column with no
        true entry is a copy of a zero array, not read."""
        n = self.num_envs
        each = chain.from_iterable
        return (
            list(each([p[0] for p in parts])),
            np.fromiter(each([p[1] for p in parts]), FLOAT, n),
            np.fromiter(each([p[2] for p in parts]), BOOL, n)
            if True in [p[5] for p in parts]
            else self._false.copy(),
            np.fromiter(each([p[3] for p in parts]), BOOL, n)
            if True in [p[6] for p in parts]
            else self._false.copy(),
            list(each([p[4] for p in parts])),
        )

    def _lost_block(self, wk: _Worker, actions: list[Any], reason: str) -> Columns:
        """The loss reports of a lost worker's block, as a reply's columns."""
        todo = [(wk.lo + j, j, a) for j, a in enumerate(actions[wk.lo : wk.hi])]
        results: list[Any] = [None] * self.num_envs
        self._fill_lost(wk, todo, results, reason)
        obs, rewards, terminated, truncated, infos = zip(*results[wk.lo : wk.hi], strict=True)
        any_term, any_trunc = True in terminated, True in truncated
        return list(obs), rewards, terminated, truncated, list(infos), any_term, any_trunc

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        results: list[Any] = [None] * len(items)
        groups = self._groups(items)
        order = sorted(groups)
        workers = self._workers
        for k in order:
            workers[k].lock.acquire()
        try:
            sent: list[tuple[int, list[tuple[int, int, Any]]]] = []
            for k in order:
                wk = workers[k]
                todo = []
                for pos, j, action in groups[k]:
                    owed = wk.pending.pop(j, None)
                    if owed is not None:
                        results[pos] = owed
                    else:
                        todo.append((pos, j, action))
                if not todo:
                    continue
                try:
                    self._send(wk, ("step", [(j, a) for _, j, a in todo]))
                    sent.append((k, todo))
                except _WorkerLost as e:
                    self._fill_lost(wk, todo, results, str(e))
            deadline = self._deadline()
            error: BaseException | None = None
            for k, todo in sent:
                wk = workers[k]
                try:
                    out = self._recv(wk, deadline, "stepping")
                except _WorkerLost as e:
                    self._fill_lost(wk, todo, results, str(e))
                    continue
                except Exception as e:  # an env raised: read the other replies, then raise
                    error = error or e
                    continue
                for (pos, _, _), res in zip(todo, out, strict=True):
                    results[pos] = res
            if error is not None:
                raise error
        finally:
            for k in order:
                workers[k].lock.release()
        return results

    def _fill_lost(
        self, wk: _Worker, todo: list[tuple[int, int, Any]], results: list[Any], reason: str
    ) -> None:
        self._recover(wk, reason)
        for pos, j, _ in todo:
            results[pos] = wk.pending.pop(j)

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        results: list[Any] = [None] * len(items)
        groups = self._groups([(i, (seed, opts)) for i, seed, opts in items])
        order = sorted(groups)
        for k in order:
            self._workers[k].lock.acquire()
        try:
            for k in order:
                self._send_reset(self._workers[k], groups[k])
            error: BaseException | None = None
            for k in order:
                wk = self._workers[k]
                try:
                    out = self._recv(wk, self._deadline(), "resetting")
                except _WorkerLost as e:  # restart it and try once more
                    self._recover(wk, str(e))
                    self._send_reset(wk, groups[k])
                    try:
                        out = self._recv(wk, self._deadline(), "resetting")
                    except _WorkerLost as e2:
                        raise VectorEnvError(
                            f"worker {wk.index} ({self._ids_of(wk)}) was lost twice while "
                            f"resetting: {e2}; check the env's reset()"
                        ) from None
                except Exception as e:  # an env raised: read the other replies, then raise
                    error = error or e
                    continue
                for (pos, j, _), res in zip(groups[k], out, strict=True):
                    wk.pending.pop(j, None)
                    results[pos] = res
            if error is not None:
                raise error
        finally:
            for k in order:
                self._workers[k].lock.release()
        return results

    def _send_reset(self, wk: _Worker, group: list[tuple[int, int, Any]]) -> None:
        with contextlib.suppress(_WorkerLost):  # the receive reports it
            self._send(wk, ("reset", [(j, s, o) for _, j, (s, o) in group]))

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        out: list[Any] = []
        for wk in self._workers:
            with wk.lock:
                try:
                    self._send(wk, ("call", (name, args)))
                    out.extend(self._recv(wk, self._deadline(), f"calling {name}"))
                except _WorkerLost as e:
                    self._recover(wk, str(e))
                    raise VectorEnvError(f"worker {wk.index} was lost during call: {e}") from None
        return out

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
                    with contextlib.suppress(_WorkerLost, OSError, VectorEnvError):
                        self._send(wk, ("close", None))
        for wk in self._workers:
            with wk.lock:
                if wk.chan is not None:
                    with contextlib.suppress(Exception):
                        wk.chan.recv(5)
                    if wk.process is not None:
                        wk.process.join(5)
                self._kill(wk)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the live worker processes."""
        return [wk.process.pid for wk in self._workers if wk.process is not None]
