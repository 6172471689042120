"""``gem.vector``: GEM's vector envs over gemgym's (``sync`` and ``thread`` backends)."""
