"""The base of the backends whose envs live in hosts: worker processes (``process``) or Ray actors
(``ray``).

:class:`HostedVectorEnv` does the bookkeeping the two share: the layout (env ``i`` lives in host
``i * hosts // num_envs``, contiguous blocks), batched messages (one per host), the full-batch hot
path, the reports owed to the envs of a lost host, restarts with reproducible seeds, and the
recovery from a lost host. A backend supplies the transport: how a host is started, stopped,
sent a command and answered (:meth:`HostedVectorEnv._start` and the other hooks).

Crash isolation: a host that dies or takes longer than ``step_timeout`` seconds for a step is
stopped and started again, and its envs are rebuilt. Each of them is then reported once as
``truncated=True``, reward 0, with ``info["worker_error"]`` saying what happened; the other hosts'
results come back as usual. A rebuilt env that was reset with a seed before gets a seed derived
from that one and the restart count for its next unseeded reset, so a seeded run stays
reproducible through a loss at the same step. After a loss:

* ``SAME_STEP``: the env was reset at once; the observation is the first of the new episode, and
  ``info["final_obs"]`` is ``None``.
* ``NEXT_STEP``: the observation is ``None``; the next step resets the env (as after any episode end).
* ``DISABLED``: the observation is ``None``; reset the env yourself.

An env of the lost host that was not in the current step is reported on its next step. An exception
raised by an env is not a loss: it is re-raised in the caller, and the host stays up.

The commands a host answers are the methods of :class:`~gemgym.vector._group.EnvGroup`:
``columns`` (the full batch), ``step``, ``reset``, ``call`` and ``close``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, TypeVar

import numpy as np

from gemgym.errors import VectorEnvError
from gemgym.vector._group import (
    AutoresetMode,
    Columns,
    StepTuple,
    VecStep,
    arrays,
    check_call,
    to_columns,
)
from gemgym.vector.base import EnvRecipe, ResetItem, VectorEnv

__all__ = ["Host", "HostLost", "HostedVectorEnv"]


class HostLost(Exception):
    """A host died or did not answer in time; the message says which."""


class Host:
    """The vector env's record of one host: its block of envs (``lo`` to ``hi``), a lock, and
    the loss reports owed to its envs (local index -> report). Backends add their handle."""

    def __init__(self, index: int, lo: int, hi: int) -> None:
        self.index = index
        self.lo = lo
        self.hi = hi
        self.lock = threading.Lock()
        self.pending: dict[int, StepTuple] = {}

    @property
    def env_indices(self) -> range:
        return range(self.lo, self.hi)


H = TypeVar("H", bound=Host)
Todo = list[tuple[int, int, Any]]
"""``(position in the results, local index, payload)`` of the envs a host is asked about."""
Sent = list[tuple[Any, Todo, Any]]
"""Per host asked: what it was asked and its ticket (or the :class:`HostLost` of the send)."""


class HostedVectorEnv(VectorEnv, Generic[H]):
    """The shared part of the ``process`` and ``ray`` backends (see the module doc).

    Attributes:
        restarts: how many times a host was lost and started again.
        step_timeout: seconds a host may take for one (batched) step; ``None`` waits forever.
    """

    host_kind = "worker"
    """What a host is called in messages."""
    host_restarted = "restarted"
    """What happens to a lost host, in messages."""

    _hosts: list[H]

    # -- transport hooks -------------------------------------------------------------------------
    def _new_host(self, index: int, lo: int, hi: int) -> H:
        """The record of host ``index`` (the backend's :class:`Host`)."""
        raise NotImplementedError

    def _start(self, host: H, needs_reset: bool, seeds: list[int | None] | None) -> None:
        """Start the host: it builds its envs into an :class:`~gemgym.vector._group.EnvGroup`
        (``needs_reset``, ``seeds``: see there) without waiting for it."""
        raise NotImplementedError

    def _await_ready(self, host: H) -> None:
        """Wait until the host built its envs; raise what went wrong."""
        raise NotImplementedError

    def _stop(self, host: H) -> None:
        """Kill the host (nothing of it runs afterwards)."""
        raise NotImplementedError

    def _send(self, host: H, cmd: str, payload: Any) -> Any:
        """Send ``cmd`` (a method of the host's group) with ``payload``; return a ticket for
        :meth:`_recv`. Raise :class:`HostLost` when the host is gone."""
        raise NotImplementedError

    def _recv(self, host: H, ticket: Any, deadline: float | None, what: str) -> Any:
        """The answer of a :meth:`_send`, waited for until ``deadline`` (``time.monotonic``).
        Raise :class:`HostLost` for a dead or late host, and the env's own exception for an
        env that raised."""
        raise NotImplementedError

    # -- set-up --------------------------------------------------------------------------------
    def _init_hosts(
        self,
        recipes: Sequence[EnvRecipe],
        autoreset_mode: AutoresetMode | str | None,
        num_hosts: int,
        step_timeout: float | None,
    ) -> None:
        """The common part of a hosted backend's ``__init__``; :meth:`_start_hosts` follows."""
        self._init_common(recipes, autoreset_mode)
        if num_hosts < 1:
            raise VectorEnvError(f"num_{self.host_kind}s must be at least 1, got {num_hosts}")
        if step_timeout is not None and step_timeout <= 0:
            raise VectorEnvError(f"step_timeout must be positive seconds, got {step_timeout}")
        self.step_timeout = step_timeout
        self.restarts = 0
        self._last_seeds: dict[int, int] = {}  # env index -> the seed of its last seeded reset
        n = self.num_envs
        w = min(num_hosts, n)
        owner = [i * w // n for i in range(n)]
        self._hosts = []
        for k in range(w):
            lo = owner.index(k)
            self._hosts.append(self._new_host(k, lo, lo + owner.count(k)))
        self._where = [(k, i - self._hosts[k].lo) for i, k in enumerate(owner)]

    def _start_hosts(self) -> None:
        """Start every host and wait for all; on failure stop them all and raise."""
        try:
            for host in self._hosts:
                self._start(host, needs_reset=False, seeds=None)
            for host in self._hosts:
                self._await_ready(host)
        except BaseException:
            self._closed = True
            self._stop_all()
            raise

    def _stop_all(self) -> None:
        for host in self._hosts:
            self._stop(host)

    def _ids_of(self, host: H) -> str:
        return ", ".join(sorted({self.env_ids[i] for i in host.env_indices}))

    def _deadline(self) -> float | None:
        return None if self.step_timeout is None else time.monotonic() + self.step_timeout

    def _post(self, host: H, cmd: str, payload: Any) -> Any:
        """:meth:`_send`, with a lost host's :class:`HostLost` as the ticket (the answer of that
        ticket raises it: every host is asked before any loss is handled)."""
        try:
            return self._send(host, cmd, payload)
        except HostLost as e:
            return e

    def _answer(self, host: H, ticket: Any, deadline: float | None, what: str) -> Any:
        """:meth:`_recv` of a ticket of :meth:`_post`."""
        if isinstance(ticket, HostLost):
            raise ticket
        return self._recv(host, ticket, deadline, what)

    @contextlib.contextmanager
    def _locked(self, hosts: Sequence[H]) -> Iterator[None]:
        """Hold the locks of ``hosts`` (in index order: calls on disjoint envs may overlap)."""
        order = sorted(hosts, key=lambda h: h.index)
        for host in order:
            host.lock.acquire()
        try:
            yield
        finally:
            for host in order:
                host.lock.release()

    def _groups(self, items: Sequence[tuple[int, Any]]) -> dict[int, Todo]:
        """Group ``(env_index, payload)`` items by host: ``{host: [(position, local, payload)]}``."""
        groups: dict[int, Todo] = {}
        where = self._where
        for pos, (i, payload) in enumerate(items):
            k, j = where[i]
            groups.setdefault(k, []).append((pos, j, payload))
        return groups

    # -- seeds and losses ------------------------------------------------------------------------
    def _note_seeds(self, items: Sequence[ResetItem]) -> None:
        """Remember each env's last reset seed (for :meth:`_restart_seeds`)."""
        for i, seed, _ in items:
            if seed is not None:
                self._last_seeds[i] = seed

    def _restart_seeds(self, indices: Sequence[int], restarts: int) -> list[int | None]:
        """Seeds for envs rebuilt after their host was lost (the ``restarts``-th loss): one
        derived from the env's last reset seed and ``restarts``, or ``None`` for an env never
        seeded. So a seeded run that loses a host at the same step plays the same episodes."""
        out: list[int | None] = []
        for i in indices:
            base = self._last_seeds.get(i)
            if base is None:
                out.append(None)
            else:
                entropy = [abs(base), int(base < 0), restarts]
                out.append(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
        return out

    def _recover(self, host: H, reason: str) -> None:
        """Replace a lost host; owe every one of its envs a truncation report."""
        self._stop(host)
        self.restarts += 1
        mode = self.autoreset_mode
        seeds = self._restart_seeds(host.env_indices, self.restarts)
        self._start(host, needs_reset=mode is AutoresetMode.NEXT_STEP, seeds=seeds)
        self._await_ready(host)
        msg = (
            f"{self.host_kind} {host.index} was {self.host_restarted}: {reason}; "
            "this env's episode was cut short"
        )
        local = range(host.hi - host.lo)
        if mode is AutoresetMode.SAME_STEP:
            fresh = self._reset_now(host, [(j, None, None) for j in local], "after a restart")
            for j, (obs, info) in zip(local, fresh, strict=True):
                full = {**info, "worker_error": msg, "final_obs": None}
                full["final_info"] = {"worker_error": msg}
                host.pending[j] = (obs, 0.0, False, True, full)
        else:
            for j in local:
                host.pending[j] = (None, 0.0, False, True, {"worker_error": msg})

    def _reset_now(self, host: H, payload: list[ResetItem], when: str) -> list[Any]:
        """Reset envs of a host that was just started again; losing it again is final."""
        try:
            ticket = self._send(host, "reset", payload)
            return list(self._recv(host, ticket, self._deadline(), f"resetting {when}"))
        except HostLost as e:
            raise VectorEnvError(
                f"{self.host_kind} {host.index} ({self._ids_of(host)}) was lost again while "
                f"resetting {when}: {e}; check the env's reset()"
            ) from None

    def _lost(self, host: H, todo: Todo, reason: str) -> list[StepTuple]:
        """Recover a host lost while stepping the envs of ``todo``; their reports."""
        self._recover(host, reason)
        return [host.pending.pop(j) for _, j, _ in todo]

    # -- steps -----------------------------------------------------------------------------------
    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        hosts = self._hosts
        if (
            type(actions) is not list
            or len(actions) != self.num_envs
            or self._closed
            or any(host.pending for host in hosts)
        ):
            return super().step(actions)  # partial steps, owed reports, checks and errors
        # the hot path: one "columns" command per host with its block of actions; each answer
        # is the columns of the host's block (fewer objects to pickle than one tuple per env)
        # (_post and _answer, inlined: this is the hot path)
        send, recv = self._send, self._recv
        for host in hosts:
            host.lock.acquire()
        try:
            sent: list[Any] = []
            for host in hosts:
                try:
                    sent.append(send(host, "columns", actions[host.lo : host.hi]))
                except HostLost as e:
                    sent.append(e)
            deadline = self._deadline()
            parts: list[Columns] = []
            error: BaseException | None = None
            for host, ticket in zip(hosts, sent, strict=True):
                try:
                    if isinstance(ticket, HostLost):
                        raise ticket
                    parts.append(recv(host, ticket, deadline, "stepping"))
                except HostLost as e:
                    todo = [(j, j, None) for j in range(host.hi - host.lo)]
                    parts.append(to_columns(self._lost(host, todo, str(e))))
                except Exception as e:  # an env raised: read the other answers, then raise
                    error = error or e
            if error is not None:
                raise error
        finally:
            for host in hosts:
                host.lock.release()
        return self._merge(parts)

    def _merge(self, parts: list[Columns]) -> VecStep:
        """The batched 5-tuple from the hosts' columns, in env order."""
        if len(parts) == 1:
            return arrays(parts[0], self.num_envs, self._false)
        each = chain.from_iterable
        any_term = True in [p[5] for p in parts]
        any_trunc = True in [p[6] for p in parts]
        columns: Any = (  # the numeric columns as iterators: np.fromiter reads them once
            list(each([p[0] for p in parts])),
            each([p[1] for p in parts]),
            each([p[2] for p in parts]) if any_term else (),
            each([p[3] for p in parts]) if any_trunc else (),
            list(each([p[4] for p in parts])),
            any_term,
            any_trunc,
        )
        return arrays(columns, self.num_envs, self._false)

    def _send_steps(self, items: list[tuple[int, Any]]) -> tuple[list[Any], Sent]:
        """Fill owed reports into the results; send the rest, one ``step`` per host."""
        results: list[Any] = [None] * len(items)
        sent: Sent = []
        hosts = self._hosts
        for k, group in self._groups(items).items():
            host = hosts[k]
            todo = []
            for pos, j, action in group:
                owed = host.pending.pop(j, None)
                if owed is not None:
                    results[pos] = owed
                else:
                    todo.append((pos, j, action))
            if todo:
                sent.append((host, todo, self._post(host, "step", [(j, a) for _, j, a in todo])))
        return results, sent

    def _take_steps(self, results: list[Any], sent: Sent, deadline: float | None) -> None:
        """Put the hosts' answers (or, for a lost host, its reports) into the results; an env's
        exception is raised after every answer was read."""
        error: BaseException | None = None
        for host, todo, ticket in sent:
            try:
                out = self._answer(host, ticket, deadline, "stepping")
            except HostLost as e:
                out = self._lost(host, todo, str(e))
            except Exception as e:  # an env raised: read the other answers, then raise
                error = error or e
                continue
            for (pos, _, _), res in zip(todo, out, strict=True):
                results[pos] = res
        if error is not None:
            raise error

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        hosts = self._hosts
        with self._locked([hosts[k] for k in {self._where[i][0] for i, _ in items}]):
            results, sent = self._send_steps(items)
            self._take_steps(results, sent, self._deadline())
        return results

    # -- resets and calls ------------------------------------------------------------------------
    def _send_resets(self, items: list[ResetItem]) -> tuple[list[Any], Sent]:
        results: list[Any] = [None] * len(items)
        sent: Sent = []
        hosts = self._hosts
        for k, group in self._groups([(i, (s, o)) for i, s, o in items]).items():
            host = hosts[k]
            payload = [(j, s, o) for _, j, (s, o) in group]
            sent.append((host, group, self._post(host, "reset", payload)))
        return results, sent

    def _take_resets(self, results: list[Any], sent: Sent) -> None:
        """Put the hosts' reset answers into the results. A lost host is started again and asked
        once more; an env's exception is raised after every answer was read."""
        error: BaseException | None = None
        for host, group, ticket in sent:
            payload = [(j, s, o) for _, j, (s, o) in group]
            try:
                out = self._answer(host, ticket, self._deadline(), "resetting")
            except HostLost as e:  # start it again and try once more
                self._recover(host, str(e))
                out = self._reset_now(host, payload, "after its loss")
            except Exception as e:  # an env raised: read the other answers, then raise
                error = error or e
                continue
            for (pos, j, _), res in zip(group, out, strict=True):
                host.pending.pop(j, None)
                results[pos] = res
        if error is not None:
            raise error

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        hosts = self._hosts
        with self._locked([hosts[k] for k in {self._where[i][0] for i, _, _ in items}]):
            results, sent = self._send_resets(items)
            self._take_resets(results, sent)
        return results

    def _call_items(self, name: str, args: tuple[Any, ...], indices: list[int] | None) -> list[Any]:
        check_call(name)
        asked: list[tuple[H, list[int]]] = []  # per host: the positions of its envs in the answer
        if indices is None:
            asked = [(host, list(host.env_indices)) for host in self._hosts]
        else:
            for host in self._hosts:
                mine = [pos for pos, i in enumerate(indices) if host.lo <= i < host.hi]
                if mine:
                    asked.append((host, mine))
        out: list[Any] = [None] * (self.num_envs if indices is None else len(indices))
        with self._locked([host for host, _ in asked]):
            sent = []
            for host, positions in asked:
                local = None if indices is None else [indices[p] - host.lo for p in positions]
                sent.append((host, positions, self._post(host, "call", (name, args, local))))
            error: BaseException | None = None
            for host, positions, ticket in sent:  # every answer is read before an error is raised
                try:
                    answer = self._answer(host, ticket, self._deadline(), f"calling {name}")
                    for pos, value in zip(positions, answer, strict=True):
                        out[pos] = value
                except HostLost as e:
                    self._recover(host, str(e))
                    error = error or VectorEnvError(
                        f"{self.host_kind} {host.index} was lost during call: {e}"
                    )
                except Exception as e:
                    error = error or e
            if error is not None:
                raise error
        return out
