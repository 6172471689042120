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

from gemgym import (
    errors as errors,
)
from gemgym._lazy import lazy_exports
from gemgym.core import (
    ActionWrapper as ActionWrapper,
    ChatObservation as ChatObservation,
    Env as Env,
    Image as Image,
    Message as Message,
    MultimodalObservation as MultimodalObservation,
    Observation as Observation,
    ObservationWrapper as ObservationWrapper,
    RewardWrapper as RewardWrapper,
    Wrapper as Wrapper,
)
from gemgym.registry import (
    EnvSpec as EnvSpec,
    list_envs as list_envs,
    make as make,
    print_envs as print_envs,
    register as register,
    spec as spec,
)

if TYPE_CHECKING:
    from gemgym.experience import (
        Episode as Episode,
        Transition as Transition,
        read_jsonl as read_jsonl,
        rollout as rollout,
        write_jsonl as write_jsonl,
    )
    from gemgym.vector import (
        AutoresetMode as AutoresetMode,
        VectorEnv as VectorEnv,
        make_vec as make_vec,
    )

__version__ = "0.1.0"


__getattr__, __dir__ = lazy_exports(globals())
