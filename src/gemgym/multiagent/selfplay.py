"""A multi-agent game as a single-agent gemgym env: :class:`SelfPlayEnv`, and opponent policies.

The learner plays one seat; every other seat is played by an opponent policy inside ``step``, so
the env is an ordinary :class:`gemgym.Env` that every trainer, wrapper and vector backend takes::

    import gemgym
    env = gemgym.make("ma:TicTacToe-v0", opponent="expert")          # learner is X
    venv = gemgym.make_vec("ma:KuhnPoker-v0", 8, learner="random")    # seat drawn per episode

An opponent policy is ``"random"`` (a random legal move, from the env's seeded generator),
``"expert"`` (the game's expert), or any callable ``observation -> action``: a fixed rule, an LLM
agent of :mod:`gemgym.agents` (:func:`agent_policy`), or a frozen copy of the learner (e.g.
``lambda obs: frozen.generate(obs)``). ``opponent`` may also map seat names to policies.

The learner's reward of a step is what its seat earned from its move up to its next turn: its
invalid-move penalty and, when the game ends, its payoff. If the seats before the learner's end
the game before its first move (an opponent forfeits), ``reset`` returns the final observation
and the first ``step`` ends the episode with the learner's payoff (its action is ignored). Bad moves of the learner or of an
opponent follow the game's rules (penalty, retry, forfeit), never an exception.
"""

from __future__ import annotations

import itertools
import pickle
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from gemgym.core import Env
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.multiagent._load import GameSource, load_match

if TYPE_CHECKING:
    from gemgym.agents.base import Agent

__all__ = ["Policy", "SelfPlayEnv", "agent_policy"]

Policy = str | Callable[[str], str]
"""``"random"``, ``"expert"`` or a callable ``observation -> action``."""


class _AgentBox:
    """One agent shared by the policies made from one :func:`agent_policy` call, pickled as a
    spec (a factory and its arguments), not as the agent: a worker builds its own on first use."""

    def __init__(
        self, agent: Agent | None, factory: Callable[..., Agent] | None, kwargs: Mapping[str, Any]
    ) -> None:
        self._agent = agent
        self.factory = factory
        self.kwargs = dict(kwargs)

    @property
    def built(self) -> bool:
        return self._agent is not None

    @property
    def agent(self) -> Agent:
        """The agent (built from the spec on first use in this process)."""
        if self._agent is None:
            assert self.factory is not None
            self._agent = self.factory(**self.kwargs)
        return self._agent

    def __getstate__(self) -> dict[str, Any]:
        factory, kwargs = self.factory, self.kwargs
        if factory is None:  # made from an instance: send it if it pickles, else its spec
            factory, kwargs = _spec_of(self._agent)
            if factory is None:
                return {"_agent": self._agent, "factory": None, "kwargs": {}}
        return {"_agent": None, "factory": factory, "kwargs": kwargs}


_SLOTS = itertools.count(1 << 20)
"""Slots of the per-env copies of an agent policy (each env has its own conversation)."""


class _AgentPolicy:
    """An :class:`~gemgym.agents.Agent` as a policy ``observation -> action`` (see
    :func:`agent_policy`)."""

    def __init__(self, box: _AgentBox, slot: int) -> None:
        self.box = box
        self.slot = slot

    @property
    def agent(self) -> Agent:
        return self.box.agent

    def for_env(self) -> _AgentPolicy:
        """A copy for one env: the same agent, a slot (conversation) of its own."""
        return _AgentPolicy(self.box, next(_SLOTS))

    def new_episode(self) -> None:
        """A new episode starts: a chat agent forgets the old conversation."""
        if self.box.built:
            self.box.agent.start_episodes([self.slot])

    def __call__(self, observation: str) -> str:
        actions = self.agent.act([observation], slots=[self.slot], venv=None)  # type: ignore[arg-type]
        # a non-str reply (None: a reasoning-only answer) is the game's invalid move, as any
        # non-str action is; it is not turned into the text "None"
        return cast("str", actions[0])


def _spec_of(agent: Any) -> tuple[Callable[..., Agent] | None, dict[str, Any]]:
    """``(factory, kwargs)`` that build a copy of ``agent`` in another process, or
    ``(None, {})`` when the agent pickles as it is.

    An agent may say how it is built with a ``spec()`` method returning ``(factory, kwargs)``;
    :class:`~gemgym.agents.OpenAIAgent` (whose HTTP client holds locks) is rebuilt from its
    settings. Anything else must pickle, or be given to :func:`agent_policy` as a factory.
    """
    spec = getattr(agent, "spec", None)
    if callable(spec):
        factory, kwargs = spec()
        return factory, dict(kwargs)
    from gemgym.agents.openai import OpenAIAgent

    if type(agent) is OpenAIAgent:
        keys = ("model", "base_url", "system_prompt", "temperature", "max_tokens", "timeout")
        kwargs = {k: getattr(agent, k) for k in keys}
        kwargs["max_retries"] = agent.max_retries
        kwargs["keep_history"] = agent.keep_history
        for k in ("api_key_env", "max_concurrency"):  # kept by newer OpenAIAgents
            if hasattr(agent, k):
                kwargs[k] = getattr(agent, k)
        return OpenAIAgent, kwargs
    try:
        pickle.dumps(agent)
    except Exception as e:
        raise ConfigError(
            f"the opponent agent {type(agent).__name__} cannot be sent to a worker process "
            f"({type(e).__name__}: {e}); pass its class and arguments instead: "
            f"agent_policy({type(agent).__name__}, ...keyword arguments...)"
        ) from e
    return None, {}


def agent_policy(
    agent: Agent | Callable[..., Agent], slot: int = 0, /, **agent_kwargs: Any
) -> Callable[[str], str]:
    """Use a gemgym agent (e.g. :class:`~gemgym.agents.OpenAIAgent`) as an opponent policy.

    ``agent`` is an agent, or a class or factory called with ``agent_kwargs`` where the env plays
    (``agent_policy(OpenAIAgent, model="m", base_url=url)``). Either way the policy pickles as a
    spec, not as the agent's HTTP client: a vector backend's worker builds its own agent on first
    use, so an LLM opponent rolls out in every backend. The agent sees one observation at a time
    (under slot ``slot`` when called directly; each env that plays it uses a slot of its own) and
    starts a new conversation each episode. Agents that read the env
    through the vector env (``RandomAgent``, ``OracleAgent``) do not fit: use
    ``"random"``/``"expert"``.
    """
    if isinstance(agent, type) or not hasattr(agent, "act"):
        if not callable(agent):
            raise ConfigError(f"agent_policy needs an agent or an agent factory, got {agent!r}")
        return _AgentPolicy(_AgentBox(None, agent, agent_kwargs), slot)
    if agent_kwargs:
        raise ConfigError("keyword arguments of agent_policy go with an agent class or factory")
    return _AgentPolicy(_AgentBox(cast("Agent", agent), None, {}), slot)


class SelfPlayEnv(Env[str, str]):
    """One seat of a multi-agent game, the others played by opponent policies (module docstring).

    Args:
        game: a registered id (``"ma:TicTacToe-v0"``), an entry point or a
            :class:`~gemgym.multiagent.game.TextGame` factory.
        game_kwargs: keyword arguments of the game.
        learner: the learner's seat: a seat name, an index into ``possible_agents``, ``None``
            (the first seat) or ``"random"`` (drawn each episode from the env's generator).
        opponent: the policy of every other seat, or a mapping seat -> policy.
        max_invalid_moves: rejected moves in a row after which a seat forfeits.
        invalid_move_penalty: reward of a rejected move.
    """

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": True, "category": "multiagent"}

    def __init__(
        self,
        game: GameSource,
        game_kwargs: Mapping[str, Any] | None = None,
        learner: str | int | None = None,
        opponent: Policy | Mapping[str, Policy] = "random",
        max_invalid_moves: int = 3,
        invalid_move_penalty: float = -0.1,
    ) -> None:
        self.match = load_match(game, game_kwargs, max_invalid_moves, invalid_move_penalty)
        self.game = self.match.game
        seats = self.game.possible_agents
        if learner is None:
            learner = seats[0]
        elif isinstance(learner, int) and not isinstance(learner, bool):
            if not -len(seats) <= learner < len(seats):
                raise ConfigError(f"learner index {learner} out of range for seats {seats}")
            learner = seats[learner]
        elif learner != "random" and learner not in seats:
            raise ConfigError(f"learner must be one of {seats}, an index or 'random'")
        self.learner_choice = learner
        self.learner = seats[0] if learner == "random" else str(learner)
        policies: dict[str, Policy] = {}
        for seat in seats:
            p = opponent.get(seat, "random") if isinstance(opponent, Mapping) else opponent
            if not (callable(p) or p in ("random", "expert")):
                raise ConfigError(
                    f"opponent policy {p!r} must be 'random', 'expert' or a callable obs -> action"
                )
            policies[seat] = p.for_env() if isinstance(p, _AgentPolicy) else p
        if isinstance(opponent, Mapping):
            unknown = set(opponent) - set(seats)
            if unknown:
                raise ConfigError(f"opponent names unknown seats {sorted(unknown)}; seats: {seats}")
        self.policies = policies
        self._started = False
        self._opponent_rng = random.Random()
        self._pending = 0.0
        self._ended_early = False

    @property
    def possible_agents(self) -> tuple[str, ...]:
        """The game's seats."""
        return self.game.possible_agents

    def _opponent_action(self, seat: str) -> str:
        policy = self.policies[seat]
        if policy == "random":
            return self.game.random_action(seat, self._opponent_rng)
        if policy == "expert":
            return self.game.expert_action(seat)
        return cast("Callable[[str], str]", policy)(self.match.observe(seat))

    def _run_opponents(self) -> float:
        """Let the other seats play until the learner must act or the game ends; the learner's
        reward meanwhile."""
        earned = 0.0
        while not self.match.over and self.learner not in self.match.acting():
            for seat in self.match.acting():
                if self.match.over:
                    break
                rewards, _ = self.match.play_move(seat, self._opponent_action(seat))
                earned += rewards[self.learner]
        return earned

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self.learner_choice == "random":
            self.learner = self.rng.choice(self.game.possible_agents)
        for policy in self.policies.values():
            if isinstance(policy, _AgentPolicy):
                policy.new_episode()
        self.match.reset(self.rng)
        self._opponent_rng = random.Random(self.rng.getrandbits(64))
        self._started = True
        # seats before the learner's; if they end the game (an opponent forfeits), the first
        # step reports it: its action is ignored, its reward is the learner's payoff
        self._pending = self._run_opponents()
        self._ended_early = self.match.over
        return self.match.observe(self.learner), self._info()

    def _info(self) -> dict[str, Any]:
        info = self.match.info(self.learner)
        info["learner"] = self.learner
        return info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._ended_early:
            self._ended_early = False
            return self.match.observe(self.learner), self._pending, True, False, self._info()
        if not self._started or self.match.over:
            raise ResetNeeded("call reset() before step() (and after the game ends)")
        rewards, _ = self.match.play_move(self.learner, action)
        reward = rewards[self.learner] + self._run_opponents() + self._pending
        self._pending = 0.0
        return self.match.observe(self.learner), reward, self.match.over, False, self._info()

    def sample_random_action(self) -> str:
        """A random legal move of the learner's seat."""
        return self.game.random_action(self.learner, self.rng)

    def expert_action(self) -> str:
        """The game's expert move for the learner's seat."""
        return self.game.expert_action(self.learner)

    def legal_actions(self) -> Sequence[str]:
        """The learner's legal moves now."""
        return self.game.legal_actions(self.learner)
