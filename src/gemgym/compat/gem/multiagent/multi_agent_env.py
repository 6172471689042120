"""``gem.multiagent.multi_agent_env``: the same module as ``gem.envs.multiagent.multi_agent_env``."""

from gemgym.compat.gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv

__all__ = ["AgentSelector", "MultiAgentEnv"]
