"""Vectorised execution: many envs stepped as one batch, behind one :class:`VectorEnv` API.

Backends (``gemgym.make_vec(..., backend=...)``):

* ``"sync"`` (:class:`SyncVectorEnv`): a loop in this process; best for cheap envs.
* ``"thread"`` (:class:`ThreadVectorEnv`): a thread per env; for envs that wait on I/O.
* ``"process"`` (:class:`ProcessVectorEnv`): worker processes hosting several envs each, with
  batched messages and crash isolation; for CPU-bound envs.
* ``"ray"`` (:class:`RayVectorEnv`): Ray actors, for a cluster (``pip install "gemgym[ray]"``).

All backends give the same results for the same seeds and actions. See ``docs/vector.md``.
"""

from gemgym.vector.base import (
    AutoresetMode,
    EnvHandle,
    EnvRecipe,
    VecStep,
    VectorEnv,
    make_vec,
    make_vector_env,
)
from gemgym.vector.sync import SyncVectorEnv

__all__ = [
    "AutoresetMode",
    "EnvHandle",
    "EnvRecipe",
    "ProcessVectorEnv",
    "RayVectorEnv",
    "SyncVectorEnv",
    "ThreadVectorEnv",
    "VecStep",
    "VectorEnv",
    "make_vec",
    "make_vector_env",
]


def __getattr__(name: str) -> object:
    if name == "ThreadVectorEnv":
        from gemgym.vector.thread import ThreadVectorEnv

        return ThreadVectorEnv
    if name == "ProcessVectorEnv":
        from gemgym.vector.process import ProcessVectorEnv

        return ProcessVectorEnv
    if name == "RayVectorEnv":
        from gemgym.vector.ray import RayVectorEnv

        return RayVectorEnv
    raise AttributeError(f"module 'gemgym.vector' has no attribute {name!r}")
