"""Shared fixtures."""

from __future__ import annotations

import os

import pytest

# With GEMGYM_REQUIRE_EXTRAS set (scripts/test), a test skipped for a missing required extra
# fails the run (tests/_skip_guard.py).
from _skip_guard import pytest_configure as _skip_guard_configure
from helpers.extras import SkipMissingExtras


def pytest_configure(config: pytest.Config) -> None:
    _skip_guard_configure(config)
    # a test stopped by gemgym's DependencyNotInstalled for a missing extra is skipped, naming it
    config.pluginmanager.register(SkipMissingExtras(), "gemgym-skip-missing-extras")


# Tests never touch the network: make Hugging Face libraries fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
