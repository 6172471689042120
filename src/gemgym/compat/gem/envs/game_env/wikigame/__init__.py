"""``gem.envs.game_env.wikigame``: GEM's WikiGame package path."""

from gemgym.compat.gem.envs.game_env.wikigame.wikigame import WikiGameEnv

__all__ = ["WikiGameEnv"]
