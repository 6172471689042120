"""Stock wrappers. :class:`ToolEnvWrapper` (from :mod:`gemgym.wrappers.tools`) loads on use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports
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


__getattr__, __dir__ = lazy_exports(globals(), {"ToolEnvWrapper": "gemgym.wrappers.tools"})
