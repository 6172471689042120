"""Stock wrappers. :class:`ToolEnvWrapper` (from :mod:`gemgym.wrappers.tools`) loads on use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports
from gemgym.wrappers.common import (
    EpisodeStatistics as EpisodeStatistics,
    OrderEnforcing as OrderEnforcing,
    TimeLimit as TimeLimit,
)
from gemgym.wrappers.history import (
    ChatHistory as ChatHistory,
    ConcatHistory as ConcatHistory,
)

if TYPE_CHECKING:
    from gemgym.wrappers.tools import (
        ToolEnvWrapper as ToolEnvWrapper,
    )


__getattr__, __dir__ = lazy_exports(globals())
