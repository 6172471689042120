"""The episode engine: many episodes in flight, async-first, every front end on top of it.

:class:`Engine` plays :class:`EpisodeSpec`\\ s (an index, a reset seed, reset options, a
group) over env sources with one policy and yields each :class:`~gemgym.episodes.Episode` as it
ends. ``concurrency`` episodes are in flight, each in its own slot; a slot takes the next spec
as soon as its episode ends.

* **Env sources** (:class:`EnvSource`): an env id or factory (the engine makes and reuses
  copies), an env (copied with ``spawn``), or a :class:`~gemgym.vector.VectorEnv` made with
  ``autoreset_mode="disabled"`` (its slots, on any backend). Several named sources can play in
  one run (mixed envs, eval suites): each spec names its source.
* **Env I/O never holds the loop.** An env whose ``astep``/``areset`` truly await is awaited; an
  env that declares :attr:`~gemgym.Env.blocking_io` (sandboxes, graders, search, MCP, remote
  envs) has its sync ``step``/``reset`` run on the engine's own bounded executor, apart from
  the model's threads. Envs are made and warmed up (:meth:`~gemgym.Env.warmup`: grader and
  sandbox pools) on that executor before their first episode.
* **Policies** (:mod:`gemgym.episodes.policy`): per-turn async policies, or batched ones that
  the engine calls once for the turns of every episode in flight.
* **Token recording**: with a :class:`Recorder` (:class:`gemgym.llm.rollout.TokenRecorder`),
  the record holds the token ids the model was conditioned on and sampled, and never exceeds
  the context window.
* **Failures stay in their episode**: an exception in reset, the model call, the step, a tool
  or the grader ends that episode only, with ``finish_reason="error"``, the stage and the
  message (:mod:`gemgym.episodes.outcomes`). A batch policy that raises is asked again for
  each request alone before any episode fails. A :class:`~gemgym.errors.ConfigError` from the
  policy or the recorder (a setup that cannot work, e.g. images for a text-only model) or a
  :class:`~gemgym.errors.ModelUnavailableError` (the model cannot be reached at all) stops the
  run.
* **Seeds**: the engine resets each episode with its spec's seed and gives the policy the
  turn's sampling seed ``derive_seed(seed, *spec.key, turn)``; so the same specs give the same
  episodes at any concurrency.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from gemgym.episodes._sync import run_sync
from gemgym.episodes.outcomes import Stage, check_max_turns, derive_seed, turn_cap_reached
from gemgym.episodes.policy import Action, ActRequest, BatchPolicy, Policy, as_action
from gemgym.episodes.record import Episode, ObservationRole, Turn
from gemgym.episodes.sources import EnvSource
from gemgym.errors import (
    ConfigError,
    DatasetError,
    DependencyNotInstalled,
    EnvLostError,
    GradingError,
    ModelUnavailableError,
    RegistryError,
    SandboxUnavailableError,
    ToolError,
)
from gemgym.prompting import model_view

if TYPE_CHECKING:
    pass

__all__ = [
    "Engine",
    "EngineStats",
    "EnvSource",
    "EpisodeSpec",
    "Recorder",
    "error_stage",
    "run_sync",
]

T = TypeVar("T")
StepTuple = tuple[Any, float, bool, bool, dict[str, Any]]


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play.

    Attributes:
        index: the episode's number in the run (its record's ``index``).
        seed: its reset seed (``None``: the env's own random stream).
        source: which env source plays it (``None``: the engine's only source).
        options: reset options (e.g. ``{"index": 3}`` for a dataset item).
        group, sample: its seed group (default: its index, a group of one) and its number
            within the group.
        key: what its sampling seeds derive from (default ``(index,)``).
    """

    index: int
    seed: int | None = None
    source: Hashable = None
    options: Mapping[str, Any] | None = None
    group: int | None = None
    sample: int = 0
    key: tuple[Any, ...] | None = None


@dataclass
class EngineStats:
    """Where a run's time went.

    Attributes:
        wall_s: the whole run; env_s: env resets and steps (tools and grading included),
            summed over episodes; model_s: waiting for the policy, summed over episodes;
            render_s: rendering and tokenising (token recording), summed over episodes.
        requests, turns, episodes, errors: counts.
    """

    wall_s: float = 0.0
    env_s: float = 0.0
    model_s: float = 0.0
    render_s: float = 0.0
    requests: int = 0
    turns: int = 0
    episodes: int = 0
    errors: int = 0


class Recorder(Protocol):
    """Keeps the token record of episodes (see :class:`gemgym.llm.rollout.TokenRecorder`).

    ``state`` is a dict the engine keeps for the recorder for the whole episode.
    """

    def begin(self, episode: Episode, view: Any, state: dict[str, Any]) -> None:
        """Render the first prompt into ``episode``; a prompt that cannot fit ends the episode
        (``finish_reason="truncation"``, ``truncation="prompt"``)."""
        ...

    def prepare(self, request: ActRequest, state: dict[str, Any]) -> bool:
        """Fill the request's ``context_ids`` and ``max_tokens``; ``False``: no room is left
        (the engine ends the episode as truncated by the context)."""
        ...

    def record(
        self,
        episode: Episode,
        turn: Turn,
        action: Action,
        next_view: Any | None,
        role: ObservationRole,
        state: dict[str, Any],
    ) -> bool:
        """Put the turn's ids in ``turn`` (``next_view`` is ``None`` after the last turn);
        ``False``: the context is full (the engine ends the episode after this turn)."""
        ...

    def overflow(self, episode: Episode, state: dict[str, Any]) -> None:
        """The model said the context is full: make the record end within it."""
        ...


def error_stage(exc: BaseException, default: Stage) -> Stage:
    """The stage an exception raised in ``default`` belongs to: a tool's failure is
    ``"tool"``, a grader's ``"grade"``, a lost env host's (:class:`EnvLostError`) ``"env"``."""
    if isinstance(exc, EnvLostError):
        return "env"
    if isinstance(exc, ToolError):
        return "tool"
    if isinstance(exc, GradingError):
        return "grade"
    return default


def _reset_stage(exc: BaseException) -> Stage:
    """``"env"`` for a lost env host, else ``"reset"``."""
    return "env" if isinstance(exc, EnvLostError) else "reset"


_CANNOT_MAKE = (
    ConfigError,
    RegistryError,
    DependencyNotInstalled,
    DatasetError,
    SandboxUnavailableError,
)
"""Errors making an env that stop the run (an unknown id, a bad kwarg, a missing extra, no
sandbox on this machine)."""


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _started_executor(workers: int) -> ThreadPoolExecutor:
    """A thread pool whose ``workers`` threads are all started (each submit starts one while
    the others wait at the barrier)."""
    executor = ThreadPoolExecutor(workers, thread_name_prefix="gemgym-env")
    ready = threading.Barrier(workers + 1)
    for _ in range(workers):
        executor.submit(ready.wait)
    ready.wait()
    return executor


# -- the engine -------------------------------------------------------------------------------


class _Batcher:
    """Gathers one request from every episode in flight and calls a batch policy once."""

    def __init__(self, policy: BatchPolicy) -> None:
        self.policy = policy
        self.live = 0
        self.pending: list[tuple[ActRequest, asyncio.Future[Action]]] = []

    async def act(self, request: ActRequest) -> Action:
        fut: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self.pending.append((request, fut))
        self.poke()
        return await fut

    def poke(self) -> None:
        if self.pending and len(self.pending) >= self.live:
            batch = sorted(self.pending, key=lambda p: p[0].slot)
            self.pending = []
            self._flush(batch)

    def _flush(self, batch: list[tuple[ActRequest, asyncio.Future[Action]]]) -> None:
        requests = [r for r, _ in batch]
        t = time.perf_counter()
        try:
            answers = list(self.policy.act_batch(requests))
            if len(answers) != len(requests):
                raise ConfigError(
                    f"the policy returned {len(answers)} actions for {len(requests)} requests"
                )
        except (ConfigError, ModelUnavailableError) as e:
            for _, fut in batch:
                fut.set_exception(e)
            return
        except Exception:  # split the batch: each request alone, so one bad one fails alone
            answers = []
            for r in requests:
                try:
                    answers.append(as_action(next(iter(self.policy.act_batch([r])))))
                except Exception as e:
                    answers.append(Action(error=_message(e), requests=0))
        latency = time.perf_counter() - t
        for (_, fut), a in zip(batch, answers, strict=True):
            action = as_action(a)
            action.latency_s = action.latency_s or latency
            fut.set_result(action)


class Engine:
    """Plays episodes over env sources with one policy (see the module docstring).

    Args:
        policy: a :class:`~gemgym.episodes.policy.Policy` or
            :class:`~gemgym.episodes.policy.BatchPolicy`.
        sources: one :class:`EnvSource` (or anything :meth:`EnvSource.make` takes), or a
            mapping of names to them (specs name their source).
        concurrency: episodes in flight (the number of slots; for a vector env source, at most
            its number of envs is useful).
        max_turns: the turn cap (:func:`~gemgym.episodes.outcomes.turn_cap_reached`).
        seed: base of the policy's per-turn sampling seeds (``None``: unseeded).
        recorder: keeps token records (default: the policy's ``recorder`` attribute, which
            token policies carry).
        request_timeout: seconds a policy call may take before its episode fails (stage
            ``"model"``).
        env_workers: threads of the executor for blocking envs (default: ``concurrency``).
        stats: filled with where the time went.
    """

    def __init__(
        self,
        policy: Policy | BatchPolicy,
        sources: Any,
        *,
        concurrency: int = 8,
        max_turns: int | None = None,
        seed: int | None = None,
        recorder: Recorder | None = None,
        request_timeout: float | None = None,
        env_workers: int | None = None,
        stats: EngineStats | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.policy = policy
        if isinstance(sources, Mapping):
            self.sources: dict[Hashable, EnvSource] = {
                k: EnvSource.make(v) for k, v in sources.items()
            }
        else:
            self.sources = {None: EnvSource.make(sources)}
        self.concurrency = int(concurrency)
        self.max_turns = check_max_turns(max_turns)
        self.seed = seed
        self.recorder = recorder if recorder is not None else getattr(policy, "recorder", None)
        self.request_timeout = request_timeout
        self.env_workers = env_workers or self.concurrency
        self.stats = stats if stats is not None else EngineStats()
        self._executor: ThreadPoolExecutor | None = None
        self._starting: asyncio.Future[ThreadPoolExecutor] | None = None
        self._batcher: _Batcher | None = None
        if not asyncio.iscoroutinefunction(getattr(policy, "act", None)):
            if not callable(getattr(policy, "act_batch", None)):
                raise ConfigError(
                    "a policy has async act(request) or act_batch(requests) "
                    f"(see gemgym.episodes.policy), got {type(policy).__name__}; wrap an "
                    "agent in gemgym.episodes.AgentPolicy"
                )
            self._batcher = _Batcher(cast("BatchPolicy", policy))

    # -- executor ------------------------------------------------------------------------------
    async def _run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        executor = self._executor or await self._start_executor()
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _start_executor(self) -> ThreadPoolExecutor:
        """The executor, with all its threads started off the loop: ``Thread.start`` waits for
        the new thread to run, which busy threads (envs being made) delay by tens of ms."""
        loop = asyncio.get_running_loop()
        starting = self._starting
        if starting is None or (
            starting.cancelled() if starting.done() else starting.get_loop() is not loop
        ):
            starting = self._starting = loop.run_in_executor(
                None, _started_executor, self.env_workers
            )
        executor = await asyncio.shield(starting)
        if self._executor is None:
            self._executor = executor
        return self._executor

    def close(self) -> None:
        """Close the envs the engine made and its executor (vector envs given to it stay open)."""
        for source in self.sources.values():
            source.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        self._starting = None

    # -- playing -------------------------------------------------------------------------------
    async def play(self, specs: Iterable[EpisodeSpec]) -> AsyncIterator[Episode]:
        """Play ``specs`` (``concurrency`` at once) and yield each episode as it ends.

        Cancelled (or the consumer stops early), the episodes in flight are stopped; an
        exception that is not an episode's own (a :class:`ConfigError` of the policy) stops
        the run and is raised here.
        """
        todo = iter(specs)
        out: asyncio.Queue[Episode | BaseException | None] = asyncio.Queue()
        n = self.concurrency
        running = n
        if self._batcher is not None:
            self._batcher.live = n

        async def worker(slot: int) -> None:
            nonlocal running
            try:
                for spec in todo:
                    out.put_nowait(await self._play(slot, spec))
            except BaseException as e:
                out.put_nowait(e)
            finally:
                running -= 1
                if self._batcher is not None:
                    self._batcher.live -= 1
                    self._batcher.poke()
                if running == 0:
                    out.put_nowait(None)

        t0 = time.perf_counter()
        open_run = getattr(self.policy, "open_run", None)
        if open_run is not None:
            await open_run()
        tasks = [asyncio.ensure_future(worker(s)) for s in range(n)]
        try:
            while True:
                item = await out.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            close_run = getattr(self.policy, "close_run", None)
            if close_run is not None:
                await close_run()
            self.stats.wall_s += time.perf_counter() - t0

    async def run(self, specs: Iterable[EpisodeSpec]) -> list[Episode]:
        """Play ``specs``; the episodes ordered by index."""
        eps = [e async for e in self.play(specs)]
        return sorted(eps, key=lambda e: e.index)

    async def _act(self, request: ActRequest) -> Action:
        if self._batcher is not None:
            return await self._batcher.act(request)
        call = self.policy.act(request)  # type: ignore[union-attr]
        if self.request_timeout is None:
            return as_action(await call)
        try:
            return as_action(await asyncio.wait_for(call, self.request_timeout))
        except TimeoutError:
            return Action(
                error=f"the model took longer than request_timeout={self.request_timeout}s"
            )

    async def _play(self, slot_no: int, spec: EpisodeSpec) -> Episode:
        st, rec = self.stats, self.recorder
        source = self.sources.get(spec.source)
        if source is None:
            raise ConfigError(f"no env source named {spec.source!r} (have {list(self.sources)})")
        group = spec.index if spec.group is None else spec.group
        ep = Episode(source.env_id, spec.index, spec.seed, group=group, sample=spec.sample)
        key = spec.key if spec.key is not None else (spec.index,)
        t_start = time.perf_counter()
        try:
            slot = await source.acquire(self._run_blocking)
        except _CANNOT_MAKE:  # the env cannot be made as asked: no episode can play
            raise
        except Exception as e:
            return self._fail(ep, _reset_stage(e), e, t_start)
        ep.env_id = slot.env_id
        healthy = True
        try:
            t = time.perf_counter()
            try:
                obs, info = await slot.reset(spec.seed, spec.options)
            except Exception as e:
                healthy = False
                return self._fail(ep, _reset_stage(e), e, t_start)
            finally:
                st.env_s += time.perf_counter() - t
            ep.initial_observation, ep.reset_info = obs, info
            # one tick after a reset, so that episodes that start together do not all come back
            # in one tick: a batching model then computes one group's turns while the loop
            # renders and steps the next group's, instead of waiting for all of them
            await asyncio.sleep(0)
            view = model_view(obs, info)
            role: ObservationRole = "user"
            rec_state: dict[str, Any] = {}
            policy_state: dict[str, Any] = {}
            if rec is not None:
                t = time.perf_counter()
                rec.begin(ep, view, rec_state)
                st.render_s += time.perf_counter() - t
                if ep.finish_reason != "cut":
                    return self._done(ep, t_start)
            while True:
                turn_no = len(ep.turns)
                if turn_cap_reached(turn_no, self.max_turns):
                    return self._end(ep, "truncation", "max_turns", t_start)
                request = ActRequest(
                    ep,
                    view,
                    turn_no,
                    slot_no,
                    derive_seed(self.seed, *key, turn_no),
                    role,
                    slot.access,
                    policy_state,
                )
                if rec is not None and not rec.prepare(request, rec_state):
                    rec.overflow(ep, rec_state)
                    return self._end(ep, "truncation", "context", t_start)
                t = time.perf_counter()
                try:
                    action = await self._act(request)
                except (ConfigError, ModelUnavailableError):
                    raise
                except Exception as e:
                    return self._fail(ep, "model", e, t_start)
                finally:
                    st.model_s += time.perf_counter() - t
                st.requests += action.requests
                usage = ep.usage
                usage["requests"] = usage.get("requests", 0) + action.requests
                if action.prompt_tokens or action.completion_tokens:
                    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + action.prompt_tokens
                    usage["completion_tokens"] = (
                        usage.get("completion_tokens", 0) + action.completion_tokens
                    )
                if action.finish_reason == "context":  # the server: the prompt does not fit
                    if rec is not None:
                        rec.overflow(ep, rec_state)
                    return self._end(ep, "truncation", "context", t_start)
                if action.error is not None:
                    return self._fail(ep, "model", action.error, t_start)
                if (
                    rec is not None
                    and action.finish_reason == "length"
                    and not (action.token_ids or action.action)
                ):
                    rec.overflow(ep, rec_state)  # the model had no room for a single token
                    return self._end(ep, "truncation", "context", t_start)
                if action.warning:
                    ep.warnings.append(action.warning)
                t = time.perf_counter()
                try:
                    obs_next, reward, term, trunc, info = await slot.step(action.action)
                except Exception as e:
                    healthy = False  # its state is unknown: a fresh env plays the next one
                    return self._fail(ep, error_stage(e, "step"), e, t_start)
                finally:
                    env_s = time.perf_counter() - t
                    st.env_s += env_s
                term, trunc = bool(term), bool(trunc)
                turn = Turn(
                    obs,
                    action.action,
                    float(reward),
                    term,
                    trunc,
                    info,
                    obs_next,
                    latency_s=action.latency_s,
                    env_s=env_s,
                )
                last = term or trunc or turn_cap_reached(turn_no + 1, self.max_turns)
                view = model_view(obs_next, info)
                role = "tool" if info.get("use_tool") else "user"
                fits = True
                if rec is not None:
                    t = time.perf_counter()
                    fits = rec.record(ep, turn, action, None if last else view, role, rec_state)
                    st.render_s += time.perf_counter() - t
                ep.turns.append(turn)
                st.turns += 1
                obs = obs_next
                if term:
                    return self._end(ep, "env_end", None, t_start)
                if trunc:
                    return self._end(ep, "truncation", "env", t_start)
                if not fits:
                    return self._end(ep, "truncation", "context", t_start)
        except asyncio.CancelledError:
            healthy = False
            raise
        finally:
            source.release(slot, healthy)

    def _done(self, ep: Episode, t_start: float) -> Episode:
        ep.wall_s = time.perf_counter() - t_start
        self.stats.episodes += 1
        if ep.finish_reason == "error":
            self.stats.errors += 1
        return ep

    def _end(self, ep: Episode, reason: Any, truncation: Any, t_start: float) -> Episode:
        ep.finish_reason, ep.truncation = reason, truncation
        return self._done(ep, t_start)

    def _fail(self, ep: Episode, stage: Stage, error: Any, t_start: float) -> Episode:
        ep.finish_reason, ep.error_stage = "error", stage
        ep.error = error if isinstance(error, str) else _message(error)
        return self._done(ep, t_start)
