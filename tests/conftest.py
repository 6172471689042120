"""Shared fixtures."""

from __future__ import annotations

import os

# With GEMGYM_REQUIRE_EXTRAS set (scripts/test), a test skipped for a missing required extra
# fails the run (tests/_skip_guard.py).
from _skip_guard import pytest_configure  # noqa: F401

# Tests never touch the network: make Hugging Face libraries fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
