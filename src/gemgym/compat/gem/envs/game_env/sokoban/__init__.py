"""``gem.envs.game_env.sokoban``."""

from gemgym.compat.gem.envs.game_env.sokoban.sokoban import SokobanEnv

__all__ = ["SokobanEnv"]
