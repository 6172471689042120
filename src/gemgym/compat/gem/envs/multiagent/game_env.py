"""gemgym's multi-agent games as GEM ``MultiAgentEnv``s.

:class:`GameEnv` plays any ``gemgym.multiagent`` game (``ma:TicTacToe-v0``, ``ma:KuhnPoker-v0``,
``ma:Negotiation-v0``, TextArena's multi-player ``ta:*``) through GEM's multi-agent API::

    from gem.envs.multiagent.game_env import GameEnv

    env = GameEnv("ma:TicTacToe-v0")
    obs, infos = env.reset(seed=0)
    while env.agents:
        active = env.agent_selector.get_active_agents()      # the seat(s) to move
        obs, rewards, terminations, truncations, infos = env.step(
            {a: env.expert_action(a) for a in active})

The game is gemgym's :class:`~gemgym.multiagent.TextParallelEnv` (``env.parallel_env``):
its rules, invalid-move handling (a penalty and another try, a forfeit after
``max_invalid_moves``) and per-instance seeding. The active agents are the seats the game has to
move (its own turn order, not a fixed rotation); at the end of the game every seat is terminated
and leaves ``agents``, as in GEM. Keyword arguments go to ``TextParallelEnv`` (``game_kwargs=``,
``max_invalid_moves=``, ``invalid_move_penalty=``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemgym.compat.gem.envs.multiagent.multi_agent_env import (
    AgentSelector,
    MultiAgentEnv,
    StepResult,
)

if TYPE_CHECKING:
    from gemgym.multiagent import TextParallelEnv

__all__ = ["GameEnv"]


class _GameSelector(AgentSelector):
    """The game's seats to move (its ``acting_agents()``), among the live agents."""

    def __init__(self, env: TextParallelEnv, agents: list[str]) -> None:
        super().__init__(agents, mode="game")
        self._env = env

    def get_active_agents(self) -> list[str]:
        if not self._env.agents:
            return []
        return [a for a in self._env.acting_agents() if a in self._agents]

    def next(self) -> None:
        active = self.get_active_agents()
        self.selected = active[0] if active else None


class GameEnv(MultiAgentEnv):
    """A ``gemgym.multiagent`` game (an id or a ``TextGame``) as a GEM ``MultiAgentEnv``."""

    def __init__(self, game: Any, **kwargs: Any) -> None:
        super().__init__()
        from gemgym.multiagent import make_parallel

        self.parallel_env = make_parallel(game, **kwargs)
        self.possible_agents = list(self.parallel_env.possible_agents)
        self.agent_selector = _GameSelector(self.parallel_env, self.possible_agents)

    def reset(self, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start a game (seeded by ``seed``): every seat's observation and info."""
        _, infos = self.parallel_env.reset(seed=seed)
        observations, _ = super().reset(seed=seed)
        self.agent_selector.next()  # type: ignore[union-attr]
        self.infos = {a: dict(infos[a]) for a in self.agents}
        return observations, infos

    def observe(self, agent: str) -> str:
        return str(self.parallel_env.observe(agent))

    def expert_action(self, agent: str) -> str:
        """What the game's expert plays for ``agent`` now."""
        return self.parallel_env.expert_action(agent)

    def render(self) -> str:
        return self.parallel_env.render()

    def _process_actions(self, actions: dict[str, Any]) -> StepResult:
        obs, rewards, terminations, truncations, infos = self.parallel_env.step(actions)
        self.rewards = dict(rewards)
        self.terminations.update(terminations)
        self.truncations.update(truncations)
        self.infos.update(infos)
        return {a: str(o) for a, o in obs.items()}, rewards, terminations, truncations, infos

    def close(self) -> None:
        self.parallel_env.close()
