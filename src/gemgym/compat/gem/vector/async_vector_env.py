"""``gem.vector.async_vector_env``: the envs step in threads, as GEM's ``AsyncVectorEnv``."""

from __future__ import annotations

from gemgym.compat.gem.vector.vector_env import VectorEnv

__all__ = ["AsyncVectorEnv"]


class AsyncVectorEnv(VectorEnv):
    """GEM's ``AsyncVectorEnv`` (gemgym's ``thread`` backend)."""

    backend = "thread"
