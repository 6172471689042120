"""``gem.envs.multiagent.multi_agent_env``: GEM's ``MultiAgentEnv`` and ``AgentSelector``.

GEM's multi-agent base class, with GEM's semantics (code written for it subclasses it):

* a subclass sets ``possible_agents`` (and optionally ``agent_selector``) in ``__init__`` and
  implements ``observe(agent)`` and ``_process_actions(actions)``;
* ``reset(seed=None)`` -> ``({agent: observation}, {agent: info})`` for every agent;
* ``step({agent: action})`` -> five dicts; the actions must be exactly those of the active agents
  (``agent_selector.get_active_agents()``, every agent without a selector), else ``ValueError``;
  rewards accumulate per agent (``get_state(agent)[1]``), terminated or truncated agents leave
  ``agents`` after the step (the returned dicts still name them: they are copies, where GEM
  returned the env's own tables, already without them), and a selector moves to the next agent;
* ``add_agent``/``remove_agent``, ``send_message``/``broadcast_message`` (into
  ``shared_memory``), ``get_state``/``get_active_states``.

:class:`AgentSelector` is GEM's: ``"sequential"`` (one agent at a time, in turn) or
``"parallel"`` (all at once). ``reset(seed)`` gives the env its own numpy generator
(``env.np_random``); GEM's base calls a helper its ``Env`` lacks, so a seed crashes there.
gemgym's own games are GEM multi-agent envs through
:class:`gemgym.compat.gem.envs.multiagent.game_env.GameEnv`.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from gemgym.compat.gem.core import Env

__all__ = ["AgentSelector", "MultiAgentEnv"]

StepResult = tuple[
    dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]
]


class AgentSelector:
    """Which agents act now: ``"sequential"`` (one, in turn) or ``"parallel"`` (all)."""

    def __init__(self, agents: list[str], mode: str = "sequential") -> None:
        self.mode = mode
        self._agents = list(agents)
        self._current_idx = 0
        self.selected: str | None = self._agents[0] if self._agents else None

    def get_active_agents(self) -> list[str]:
        """The agents that act at this step; ``ValueError`` for an unknown mode."""
        if self.mode == "sequential":
            return [self.selected] if self.selected is not None else []
        if self.mode == "parallel":
            return list(self._agents)
        raise ValueError(f"Unknown mode: {self.mode} (use 'sequential' or 'parallel')")

    def next(self) -> None:
        """Move to the next agent (sequential mode; wraps around)."""
        if self.mode == "sequential" and self._agents:
            self._current_idx = (self._current_idx + 1) % len(self._agents)
            self.selected = self._agents[self._current_idx]

    def is_first(self) -> bool:
        return self._current_idx == 0

    def is_last(self) -> bool:
        return self._current_idx == len(self._agents) - 1

    def reinit(self, agents: list[str]) -> None:
        """Start over with ``agents``, the first one selected."""
        self._agents = list(agents)
        self._current_idx = 0
        self.selected = self._agents[0] if self._agents else None

    def add_agent(self, agent: str) -> None:
        if agent not in self._agents:
            self._agents.append(agent)

    def remove_agent(self, agent: str) -> None:
        """Drop ``agent``; the selection stays on the agent that would have acted next."""
        if agent not in self._agents:
            return
        idx = self._agents.index(agent)
        self._agents.remove(agent)
        if self._agents:
            if idx <= self._current_idx:
                self._current_idx = max(0, self._current_idx - 1)
            self._current_idx %= len(self._agents)
            self.selected = self._agents[self._current_idx]
        else:
            self._current_idx = 0
            self.selected = None


class MultiAgentEnv(Env):
    """GEM's multi-agent env base class (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents: list[str] = []
        self.agents: list[str] = []
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.agent_selector: AgentSelector | None = None
        self.shared_memory: list[dict[str, str]] = []
        self.global_context = ""
        self._np_random: np.random.Generator | None = None

    @staticmethod
    def _make_np_random(seed: int | None) -> np.random.Generator:
        return np.random.default_rng(seed)

    @property
    def np_random(self) -> np.random.Generator:
        """The env's own generator, seeded by ``reset(seed=)`` (never the global state)."""
        if self._np_random is None:
            self._np_random = self._make_np_random(None)
        return self._np_random

    def _active_agents(self) -> list[str]:
        if self.agent_selector is not None:
            return self.agent_selector.get_active_agents()
        return self.agents

    def step(self, actions: dict[str, Any]) -> StepResult:  # type: ignore[override]
        """Apply the active agents' ``actions``; ``(obs, rewards, terminations, truncations,
        infos)`` as ``_process_actions`` returns them."""
        if not isinstance(actions, dict):
            raise ValueError(f"Actions must be a dict, got {type(actions)}")
        self._validate_actions(actions, self._active_agents())
        observations, rewards, terminations, truncations, infos = self._process_actions(actions)
        # copies: an env that returns its own tables (GEM's examples do) would otherwise hand
        # back dicts from which the agents that ended at this step were already removed
        rewards, terminations, truncations = dict(rewards), dict(terminations), dict(truncations)
        infos = dict(infos)
        for agent in self.agents:
            if agent in rewards:
                self._cumulative_rewards[agent] = (
                    self._cumulative_rewards.get(agent, 0.0) + rewards[agent]
                )
        self._remove_dead_agents()
        if self.agent_selector is not None:
            self.agent_selector.next()
        return observations, rewards, terminations, truncations, infos

    def _validate_actions(self, actions: dict[str, Any], active_agents: list[str]) -> None:
        for agent in active_agents:
            if self.terminations.get(agent, True) or self.truncations.get(agent, True):
                continue
            if agent not in actions:
                raise ValueError(f"Missing action for active agent {agent}")
        for agent in actions:
            if agent not in active_agents:
                raise ValueError(
                    f"Agent {agent} provided action but is not active "
                    f"(active agents: {active_agents})"
                )

    @abc.abstractmethod
    def _process_actions(self, actions: dict[str, Any]) -> StepResult:
        """Apply the (validated) actions: the five dicts :meth:`step` returns."""

    def reset(self, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode with every possible agent: ``({agent: obs}, {agent: {}})``."""
        if seed is not None:
            self._np_random = self._make_np_random(seed)
        self.agents = list(self.possible_agents)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.infos = {agent: {} for agent in self.agents}
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.shared_memory = []
        self.global_context = ""
        if self.agent_selector is not None:
            self.agent_selector.reinit(self.agents)
        observations = {agent: self.observe(agent) for agent in self.agents}
        infos: dict[str, Any] = {agent: {} for agent in self.agents}
        return observations, infos

    @abc.abstractmethod
    def observe(self, agent: str) -> Any:
        """``agent``'s observation now."""

    def get_state(self, agent: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``(observation, cumulative reward, terminated, truncated, info)`` of ``agent``."""
        if agent not in self.agents:
            raise ValueError(f"Agent {agent} not in environment (agents: {self.agents})")
        return (
            self.observe(agent),
            self._cumulative_rewards.get(agent, 0.0),
            self.terminations.get(agent, False),
            self.truncations.get(agent, False),
            self.infos.get(agent, {}),
        )

    def get_active_states(self) -> dict[str, tuple[Any, float, bool, bool, dict[str, Any]]]:
        """:meth:`get_state` of every active agent."""
        return {a: self.get_state(a) for a in self._active_agents() if a in self.agents}

    def add_agent(self, agent_id: str) -> None:
        if agent_id in self.agents:
            return
        self.agents.append(agent_id)
        self.terminations[agent_id] = False
        self.truncations[agent_id] = False
        self.rewards[agent_id] = 0.0
        self.infos[agent_id] = {}
        self._cumulative_rewards[agent_id] = 0.0
        if self.agent_selector is not None:
            self.agent_selector.add_agent(agent_id)

    def remove_agent(self, agent_id: str) -> None:
        if agent_id not in self.agents:
            return
        self.agents.remove(agent_id)
        self.terminations.pop(agent_id, None)
        self.truncations.pop(agent_id, None)
        self.rewards.pop(agent_id, None)
        self.infos.pop(agent_id, None)
        self._cumulative_rewards.pop(agent_id, None)
        if self.agent_selector is not None:
            self.agent_selector.remove_agent(agent_id)

    def _remove_dead_agents(self) -> None:
        dead = [
            a
            for a in self.agents
            if self.terminations.get(a, False) or self.truncations.get(a, False)
        ]
        for agent in dead:
            self.remove_agent(agent)

    def send_message(self, from_agent: str, to_agent: str, message: str) -> None:
        """Append ``{"from", "to", "message"}`` to ``shared_memory``."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        if to_agent not in self.agents:
            raise ValueError(f"Receiver {to_agent} not in environment")
        self.shared_memory.append({"from": from_agent, "to": to_agent, "message": message})

    def broadcast_message(self, from_agent: str, message: str) -> None:
        """:meth:`send_message` to every other agent."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        for agent in self.agents:
            if agent != from_agent:
                self.shared_memory.append({"from": from_agent, "to": agent, "message": message})
