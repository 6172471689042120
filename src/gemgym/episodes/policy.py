"""The policy protocol: what a model (or a baseline) gets each turn and what it answers.

A policy never receives an env object. Each turn it gets an :class:`ActRequest`: the episode
record so far, the observation as the model is shown it (:func:`gemgym.prompting.model_view`),
for token policies the context ids and the room left in the context window, a per-episode
scratch dict, the turn's sampling seed, and :class:`EnvAccess`, the narrow capability an env
grants: its expert's move and a random well-formed action, nothing else.

Two shapes of policy play through the same engine:

* :class:`Policy`: ``async act(request) -> Action`` per turn (LLM servers, token backends,
  ``gemgym eval``'s agents): every episode sends its turn as soon as its env answered;
* :class:`BatchPolicy`: ``act_batch(requests) -> actions``, one blocking call for the turns of
  every episode in flight (the reference trainer's policies, :class:`~gemgym.agents.Agent`\\ s
  through :class:`AgentPolicy`): the engine gathers one request from each episode in flight and
  calls it once, so episodes move in lockstep, in slot order.

A policy answers an :class:`Action` (or a bare action, which is wrapped): the action and,
optionally, its token record (sampled ids, log-probs), its cost, or an ``error`` (the model call
failed: the episode ends with stage ``"model"``).

Optional members a policy may have, which the engine uses when present:

* ``recorder``: the :class:`~gemgym.episodes.engine.Recorder` that keeps its token records
  (a token policy carries the renderer of its model);
* ``async open_run()`` / ``async close_run()``: awaited before the first episode and after the
  last of each :meth:`~gemgym.episodes.Engine.play` (open a client on the run's event loop,
  draw the run's sampling seed; close it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from gemgym.agents.base import Agent
    from gemgym.episodes.record import Episode, ObservationRole

__all__ = [
    "ActRequest",
    "Action",
    "AgentPolicy",
    "BatchPolicy",
    "EnvAccess",
    "FunctionPolicy",
    "Policy",
    "as_action",
]

ENV_CAPABILITIES = frozenset({"expert_action", "sample_random_action"})
"""The env methods a policy may ask for (through :class:`EnvAccess`)."""


class EnvAccess:
    """What an env grants the policy playing it: its expert's move and a random action.

    ``call`` runs one of :data:`ENV_CAPABILITIES` on the env (wherever it lives: this process,
    a worker process, a Ray actor).
    """

    __slots__ = ("_call",)

    def __init__(self, call: Callable[[str], Any]) -> None:
        self._call = call

    def call(self, name: str) -> Any:
        """The env's ``name()`` (one of :data:`ENV_CAPABILITIES`)."""
        if name not in ENV_CAPABILITIES:
            raise ConfigError(
                f"a policy may ask the env only for {sorted(ENV_CAPABILITIES)}, not {name!r}"
            )
        return self._call(name)

    def expert_action(self) -> Any:
        """What the env's expert would play now."""
        return self.call("expert_action")

    def sample_random_action(self) -> Any:
        """A random, well-formed action."""
        return self.call("sample_random_action")


@dataclass
class ActRequest:
    """One turn to act on.

    Attributes:
        episode: the episode record so far (its turns, reset info; token ids for token
            policies). Read it; the engine writes it.
        view: the latest observation as the model is shown it.
        turn: the turn number (0 for the first action).
        slot: the engine slot playing the episode (stable for the whole episode).
        seed: this turn's sampling seed (:func:`~gemgym.episodes.outcomes.derive_seed` of the
            engine's seed, the episode key and the turn; ``None`` when unseeded).
        role: ``"tool"`` when ``view`` is a tool's output, else ``"user"``.
        env: the env's capability (:class:`EnvAccess`).
        state: a dict kept for the policy for the whole episode (its conversation, say).
        context_ids: for token policies, every id the model is conditioned on (else ``None``).
        max_tokens: for token policies, the room left in the context window (else ``None``).
        messages: for token policies, the conversation so far as chat messages.
        images: for token policies, the conversation's images, in order.
    """

    episode: Episode
    view: Any
    turn: int
    slot: int
    seed: int | None
    role: ObservationRole
    env: EnvAccess
    state: dict[str, Any] = field(default_factory=dict)
    context_ids: list[int] | None = None
    max_tokens: int | None = None
    messages: list[dict[str, Any]] | None = None
    images: tuple[Any, ...] = ()


@dataclass
class Action:
    """A policy's answer for one turn.

    Attributes:
        action: what is sent to the env.
        token_ids, logprobs, finish_reason, retokenized: the token record (token policies).
            ``finish_reason="context"``: the server refused the prompt as longer than the
            model's context (the episode ends truncated, cause ``"context"``; nothing is
            stepped).
        latency_s, prompt_tokens, completion_tokens, requests: what the turn cost (``requests``
            counts every try, those of a call that finally failed included).
        error: the model call failed (the episode ends with stage ``"model"``).
        warning: something about the reply a reader of the record should know (a reply with
            no text: reasoning only, or cut by ``max_tokens``); kept in
            :attr:`Episode.warnings <gemgym.episodes.Episode.warnings>`, the action is played.
    """

    action: Any = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    retokenized: bool = False
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 1
    error: str | None = None
    warning: str | None = None


def as_action(answer: Any) -> Action:
    """``answer`` if it is an :class:`Action`, else an :class:`Action` holding it."""
    return answer if isinstance(answer, Action) else Action(answer)


@runtime_checkable
class Policy(Protocol):
    """Answers one turn at a time, asynchronously."""

    async def act(self, request: ActRequest) -> Action | Any:
        """The action for ``request``."""
        ...


@runtime_checkable
class BatchPolicy(Protocol):
    """Answers the turns of every episode in flight in one blocking call."""

    def act_batch(self, requests: Sequence[ActRequest]) -> Sequence[Action | Any]:
        """One action per request, in order."""
        ...


class FunctionPolicy:
    """A batched function as a :class:`BatchPolicy`.

    ``fn(items) -> actions`` gets the views (``history=False``) or the episodes in progress
    (``history=True``) of the turns in flight.
    """

    def __init__(self, fn: Callable[[list[Any]], Sequence[Any]], *, history: bool = False) -> None:
        self.fn = fn
        self.history = history

    def act_batch(self, requests: Sequence[ActRequest]) -> Sequence[Any]:
        """``fn`` of the views or episodes."""
        items = [r.episode if self.history else r.view for r in requests]
        return list(self.fn(items))


class _SlotCalls:
    """What an :class:`~gemgym.agents.Agent` gets as ``venv``: only the granted capabilities
    of the envs in the batch's slots, through ``call(name, indices=slots)``."""

    def __init__(self, requests: Sequence[ActRequest]) -> None:
        self._by_slot = {r.slot: r.env for r in requests}
        self.num_envs = len(requests)

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None) -> list[Any]:
        if args:
            raise ConfigError(f"env capabilities take no arguments (got {args!r} for {name!r})")
        slots = list(self._by_slot) if indices is None else [int(i) for i in indices]
        missing = [s for s in slots if s not in self._by_slot]
        if missing:
            raise ConfigError(f"slots {missing} have no episode in this batch")
        return [self._by_slot[s].call(name) for s in slots]


class AgentPolicy:
    """An :class:`~gemgym.agents.Agent` (batched, slot-keyed) as a :class:`BatchPolicy`.

    The agent gets the views and the slots of the batch; for ``venv`` it gets an object whose
    ``call(name, indices=slots)`` reaches only the capabilities the envs grant (so
    :func:`~gemgym.agents.call_slots` works); it is told of new episodes with
    ``start_episodes(slots)``.
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def act_batch(self, requests: Sequence[ActRequest]) -> Sequence[Any]:
        """Tell the agent which slots start episodes, then ask it for the batch's actions."""
        started = [r.slot for r in requests if r.turn == 0]
        if started:
            self.agent.start_episodes(started)
        return self.agent.act(
            [r.view for r in requests],
            slots=[r.slot for r in requests],
            venv=_SlotCalls(requests),  # type: ignore[arg-type]
        )
