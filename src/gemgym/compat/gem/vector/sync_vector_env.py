"""``gem.vector.sync_vector_env``: the envs step one after the other."""

from __future__ import annotations

from gemgym.compat.gem.vector.vector_env import VectorEnv

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """GEM's ``SyncVectorEnv`` (gemgym's ``sync`` backend)."""

    backend = "sync"
