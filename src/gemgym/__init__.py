"""gemgym: a gym for agentic LLMs.

>>> import gemgym
>>> env = gemgym.make("game:GuessTheNumber-v0-easy")
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step(r"My guess is \\boxed{5}")

The public surface is this module's ``__all__``. Importing gemgym is fast and has no side
effects; agents, experience records and vector envs load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym import errors
from gemgym._lazy import lazy_exports
from gemgym.core import (
    ActionWrapper,
    ChatObservation,
    Env,
    Image,
    Message,
    MultimodalObservation,
    Observation,
    ObservationWrapper,
    RewardWrapper,
    Wrapper,
)
from gemgym.registry import EnvSpec, list_envs, make, print_envs, register, spec

if TYPE_CHECKING:
    from gemgym.experience import Episode, Transition, read_jsonl, rollout, write_jsonl
    from gemgym.vector import AutoresetMode, VectorEnv, make_vec

__version__ = "0.1.0"

__all__ = [
    "ActionWrapper",
    "AutoresetMode",
    "ChatObservation",
    "Env",
    "EnvSpec",
    "Episode",
    "Image",
    "Message",
    "MultimodalObservation",
    "Observation",
    "ObservationWrapper",
    "RewardWrapper",
    "Transition",
    "VectorEnv",
    "Wrapper",
    "__version__",
    "errors",
    "list_envs",
    "make",
    "make_vec",
    "print_envs",
    "read_jsonl",
    "register",
    "rollout",
    "spec",
    "write_jsonl",
]

_LAZY = {
    "Episode": "gemgym.experience",
    "Transition": "gemgym.experience",
    "read_jsonl": "gemgym.experience",
    "rollout": "gemgym.experience",
    "write_jsonl": "gemgym.experience",
    "AutoresetMode": "gemgym.vector",
    "VectorEnv": "gemgym.vector",
    "make_vec": "gemgym.vector",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
