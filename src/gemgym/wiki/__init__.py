"""WikiGame's pages, backends, ZIM file and kiwix-serve (see :mod:`gemgym.envs.games.wikigame`)."""
