"""``gem.envs.game_env``: GEM's language games, backed by gemgym's (``gemgym.envs.games``)."""
