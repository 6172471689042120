"""Stock wrappers. Tool wrappers live in :mod:`gemgym.wrappers.tools` (imported on use)."""

from gemgym.wrappers.common import EpisodeStatistics, OrderEnforcing, TimeLimit
from gemgym.wrappers.history import ChatHistory, ConcatHistory

__all__ = ["ChatHistory", "ConcatHistory", "EpisodeStatistics", "OrderEnforcing", "TimeLimit"]
