"""``gem.multiagent``: where GEM's multi-agent API lived before it moved to
``gem.envs.multiagent`` (GEM's own ``tests/test_multiagent`` still imports it from here); the
same classes."""

from gemgym.compat.gem.envs.multiagent import AgentSelector, GameEnv, MultiAgentEnv

__all__ = ["AgentSelector", "GameEnv", "MultiAgentEnv"]
