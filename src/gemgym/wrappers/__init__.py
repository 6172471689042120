"""Stock wrappers. :class:`ToolEnvWrapper` (from :mod:`gemgym.wrappers.tools`) loads on use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemgym.wrappers.common import EpisodeStatistics, OrderEnforcing, TimeLimit
from gemgym.wrappers.history import ChatHistory, ConcatHistory

if TYPE_CHECKING:
    from gemgym.wrappers.tools import ToolEnvWrapper

__all__ = [
    "ChatHistory",
    "ConcatHistory",
    "EpisodeStatistics",
    "OrderEnforcing",
    "TimeLimit",
    "ToolEnvWrapper",
]


def __getattr__(name: str) -> Any:
    if name != "ToolEnvWrapper":
        raise AttributeError(f"module 'gemgym.wrappers' has no attribute {name!r}")
    from gemgym.wrappers.tools import ToolEnvWrapper

    globals()[name] = ToolEnvWrapper
    return ToolEnvWrapper


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
