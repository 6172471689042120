"""Deprecated: :mod:`gemgym.envs.dataset` is the public module (this name warns on import)."""

from __future__ import annotations

import warnings
from typing import Any

from gemgym.envs import dataset as _public
from gemgym.envs.dataset import (
    COLUMN_ALIASES as COLUMN_ALIASES,
    DATA_DIR as DATA_DIR,
    TERMINAL_STATE as TERMINAL_STATE,
    DatasetEnv as DatasetEnv,
    DatasetSource as DatasetSource,
    DatasetSpec as DatasetSpec,
    DatasetWarning as DatasetWarning,
    Item as Item,
    ItemSource as ItemSource,
    load_items as load_items,
)

warnings.warn(
    "gemgym.envs._dataset is deprecated; import from gemgym.envs.dataset",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = _public.__all__


def __getattr__(name: str) -> Any:
    return getattr(_public, name)
