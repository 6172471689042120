"""Vectorised execution: many envs stepped as one batch.

``make_vector_env`` builds the backend chosen by name; :func:`gemgym.make_vec` is the usual way in.
"""

from gemgym.vector.base import AutoresetMode, VectorEnv, make_vector_env
from gemgym.vector.sync import SyncVectorEnv

__all__ = ["AutoresetMode", "SyncVectorEnv", "VectorEnv", "make_vector_env"]
