"""``gem.envs.game_env.crosswords``."""

from gemgym.compat.gem.envs.game_env.crosswords.crosswords import CrosswordsEnv

__all__ = ["CrosswordsEnv"]
