"""PettingZoo's two forms over a :class:`~gemgym.multiagent.game.TextGame`.

* :class:`TextAECEnv`: turn-based (Agent Environment Cycle): ``agent_selection`` acts, ``step``
  returns nothing, ``last()`` reads its observation and accumulated reward.
* :class:`TextParallelEnv`: simultaneous: ``step({agent: action})`` returns five dicts. In a
  turn-based game only the seats in ``infos[agent]["to_act"]`` move; the others' actions are
  ignored.

Both are ``pettingzoo.AECEnv`` / ``pettingzoo.ParallelEnv`` subclasses when PettingZoo is
installed (``pip install "gemgym[multiagent]"``), and pass its API and seed tests; without it they
work the same, minus ``observation_space``/``action_space`` (those need gymnasium).

Observations are :class:`TextObservation` (a ``str``); actions are text. Spaces are
:class:`TextSpace`: gymnasium ``Text`` spaces over all of Unicode whose ``sample()`` draws a
well-formed move of the game (legal or not) or, with probability ``garbage_prob``, random text, so
PettingZoo's tests play real games and hit the invalid-move path too. Seeding is per instance:
``reset(seed=s)`` gives the same game in every process.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from gemgym.errors import ClosedError, ResetNeeded, missing_dependency
from gemgym.multiagent._load import GameSource, load_match

if TYPE_CHECKING:
    _AECBase = object
    _ParallelBase = object
else:
    try:
        from pettingzoo.utils.env import AECEnv as _AECBase, ParallelEnv as _ParallelBase
    except ImportError:  # the API works without PettingZoo; its base classes add isinstance
        _AECBase = object
        _ParallelBase = object

__all__ = ["TextAECEnv", "TextObservation", "TextParallelEnv", "TextSpace", "text_space"]

_MAX_OBS_CHARS = 1_000_000


class _StrDtype:
    """``TextObservation.dtype``: numpy's ``str`` dtype, the dtype of gymnasium's ``Text``."""

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        import numpy as np

        return np.dtype(str)


class TextObservation(str):
    """A text observation: a ``str`` that also carries the ``dtype`` of its space, as PettingZoo's
    API test compares an observation's dtype with its space's."""

    __slots__ = ()
    dtype: ClassVar[Any] = _StrDtype()


def text_space(max_length: int, vocabulary: Any = None, garbage_prob: float = 0.25) -> Any:
    """A :class:`TextSpace` (needs gymnasium, which PettingZoo brings)."""
    return _text_space_class()(max_length, vocabulary, garbage_prob)


_TEXT_SPACE: type | None = None


def _text_space_class() -> type:
    global _TEXT_SPACE
    if _TEXT_SPACE is None:
        try:
            from gymnasium.spaces import Text
        except ImportError as e:
            raise missing_dependency("gymnasium (via pettingzoo)", "multiagent") from e

        class _TextSpace(Text):
            """Any text up to ``max_length`` characters (all of Unicode)."""

            def __init__(self, max_length: int, vocabulary: Any, garbage_prob: float) -> None:
                import string

                super().__init__(max_length, charset=string.printable)
                self.vocabulary = vocabulary
                self.garbage_prob = garbage_prob

            def contains(self, x: Any) -> bool:
                return isinstance(x, str) and len(x) <= self.max_length

            def sample(self, mask: Any = None, probability: Any = None) -> str:
                words = self.vocabulary() if callable(self.vocabulary) else self.vocabulary
                rng = self.np_random
                if words and rng.random() >= self.garbage_prob:
                    return str(words[int(rng.integers(len(words)))])
                length = int(rng.integers(1, min(self.max_length, 40) + 1))
                chars = self.character_list
                return "".join(chars[int(i)] for i in rng.integers(len(chars), size=length))

            def __repr__(self) -> str:
                return f"TextSpace(max_length={self.max_length})"

            def __eq__(self, other: object) -> bool:
                return isinstance(other, _TextSpace) and other.max_length == self.max_length

            __hash__ = Text.__hash__

        _TEXT_SPACE = _TextSpace
    return _TEXT_SPACE


TextSpace = text_space
"""Alias: :func:`text_space` builds the space (its class is made on first use)."""


class _Base:
    """What both forms share: the match, seeding, spaces, closing."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "name": "gemgym_text_game"}

    def __init__(
        self,
        game: GameSource,
        *,
        game_kwargs: Mapping[str, Any] | None = None,
        max_invalid_moves: int = 3,
        invalid_move_penalty: float = -0.1,
        render_mode: str | None = None,
        max_action_chars: int = 8192,
    ) -> None:
        self.match = load_match(game, game_kwargs, max_invalid_moves, invalid_move_penalty)
        self.game = self.match.game
        self.render_mode = render_mode
        self.possible_agents: list[str] = list(self.game.possible_agents)
        self.agents: list[str] = []
        self._rng: random.Random | None = None
        self._started = False
        self._closed = False
        self._max_action_chars = max_action_chars
        self._spaces: dict[str, tuple[Any, Any]] = {}

    # -- spaces ------------------------------------------------------------------------------------
    def _space_pair(self, agent: str) -> tuple[Any, Any]:
        found = self._spaces.get(agent)
        if found is None:

            def vocabulary() -> Any:
                return self.game.action_vocabulary(agent) if self._started else ()

            found = (
                text_space(_MAX_OBS_CHARS, None),
                text_space(self._max_action_chars, vocabulary),
            )
            self._spaces[agent] = found
        return found

    def observation_space(self, agent: str) -> Any:
        """The gymnasium ``Text`` space of ``agent``'s observations (the same object each call)."""
        return self._space_pair(agent)[0]

    def action_space(self, agent: str) -> Any:
        """The gymnasium ``Text`` space of ``agent``'s actions (the same object each call)."""
        return self._space_pair(agent)[1]

    # -- seeding -------------------------------------------------------------------------------------
    def _reseed(self, seed: int | None) -> random.Random:
        from gemgym.core import _check_seed

        if seed is not None:
            self._rng = random.Random(_check_seed(seed))
        elif self._rng is None:
            self._rng = random.Random()
        return self._rng

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed; make a new one")

    def observe(self, agent: str) -> TextObservation:
        """``agent``'s observation now."""
        return TextObservation(self.match.observe(agent))

    def acting_agents(self) -> list[str]:
        """The seats that move now (one in a turn-based game; GEM's ``get_active_agents``)."""
        return list(self.match.acting())

    def expert_action(self, agent: str) -> str:
        """What the game's expert plays for ``agent`` now."""
        return self.game.expert_action(agent)

    def render(self) -> str:
        """The public state as text."""
        return self.game.render()

    def close(self) -> None:
        """Release resources (idempotent)."""
        self._closed = True

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    @property
    def unwrapped(self) -> Any:
        return self

    def __str__(self) -> str:
        return f"<{type(self).__name__} {type(self.game).__name__}>"


class TextAECEnv(_Base, _AECBase):
    """The turn-based (AEC) form of a text game (see the module docstring).

    Args:
        game: a registered id (``"ma:TicTacToe-v0"``, ``"ta:Nim-v0"``), an entry point or a
            :class:`~gemgym.multiagent.game.TextGame` factory or instance.
        game_kwargs: keyword arguments of the game.
        max_invalid_moves: rejected moves in a row after which a seat forfeits.
        invalid_move_penalty: reward of a rejected move.
        render_mode: ``"ansi"`` or ``None``.
        max_action_chars: ``max_length`` of the action spaces.
    """

    def __init__(self, game: GameSource, **kwargs: Any) -> None:
        _Base.__init__(self, game, **kwargs)
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self.agent_selection: str = self.possible_agents[0]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a game; ``seed`` reseeds this env's own generator."""
        self._check_open()
        self.match.reset(self._reseed(seed))
        self._started = True
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: self.match.info(a) for a in self.agents}
        self.agent_selection = self.match.acting()[0]

    def step(self, action: Any) -> None:
        """Play ``action`` for :attr:`agent_selection` (``None`` for a seat that is done)."""
        self._check_open()
        if not self._started:
            raise ResetNeeded("call reset() before step()")
        agent = self.agent_selection
        if self.terminations.get(agent) or self.truncations.get(agent):
            self._dead_step(agent)
            return
        if not self.agents:
            raise ResetNeeded("the game is over and every seat is done; call reset()")
        self._cumulative_rewards[agent] = 0.0
        rewards, _ = self.match.play_move(agent, action)
        self.rewards = {a: rewards[a] for a in self.agents}
        for a in self.agents:
            self._cumulative_rewards[a] += self.rewards[a]
            self.infos[a] = self.match.info(a)
        if self.match.over:
            self.terminations = dict.fromkeys(self.agents, True)
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = self.match.acting()[0]

    def _dead_step(self, agent: str) -> None:
        """Remove a finished seat (PettingZoo's ``_was_dead_step``)."""
        for d in (self.rewards, self._cumulative_rewards, self.terminations, self.truncations):
            d.pop(agent, None)
        self.infos.pop(agent, None)
        self.agents.remove(agent)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if self.agents:
            self.agent_selection = self.agents[0]

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``(observation, accumulated reward, terminated, truncated, info)`` of the seat to act."""
        agent = self.agent_selection
        return (
            self.observe(agent) if observe else None,
            self._cumulative_rewards[agent],
            self.terminations[agent],
            self.truncations[agent],
            self.infos[agent],
        )

    def agent_iter(self, max_iter: int = 2**63) -> Iterator[str]:
        """Yield :attr:`agent_selection` until every seat is done (or ``max_iter`` times)."""
        for _ in range(max_iter):
            if not self.agents:
                return
            yield self.agent_selection


class TextParallelEnv(_Base, _ParallelBase):
    """The simultaneous (Parallel) form of a text game (see the module docstring); the
    arguments are :class:`TextAECEnv`'s."""

    def __init__(self, game: GameSource, **kwargs: Any) -> None:
        _Base.__init__(self, game, **kwargs)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, TextObservation], dict[str, dict[str, Any]]]:
        """Start a game: ``(observations, infos)`` of every seat."""
        self._check_open()
        self.match.reset(self._reseed(seed))
        self._started = True
        self.agents = list(self.possible_agents)
        return (
            {a: self.observe(a) for a in self.agents},
            {a: self.match.info(a) for a in self.agents},
        )

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[
        dict[str, TextObservation],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Play the moves of the seats to act (a missing one counts as an invalid move)."""
        self._check_open()
        if not self._started or not self.agents:
            raise ResetNeeded("call reset() before step() (and after the game ends)")
        live = list(self.agents)
        rewards = dict.fromkeys(live, 0.0)
        for agent in self.match.acting():
            if self.match.over:
                break
            got, _ = self.match.play_move(agent, actions.get(agent))
            for a in live:
                rewards[a] += got[a]
        over = self.match.over
        obs = {a: self.observe(a) for a in live}
        infos = {a: self.match.info(a) for a in live}
        terminations = dict.fromkeys(live, over)
        truncations = dict.fromkeys(live, False)
        if over:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def state(self) -> str:
        """The public state as text."""
        return self.game.render()
