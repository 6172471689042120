"""``gem.envs.multiagent``: GEM's multi-agent API (``MultiAgentEnv``, ``AgentSelector``) and
gemgym's games through it (``GameEnv``)."""

from gemgym.compat.gem.envs.multiagent.game_env import GameEnv
from gemgym.compat.gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv

__all__ = ["AgentSelector", "GameEnv", "MultiAgentEnv"]
