"""Shared fixtures."""

from __future__ import annotations

import os

# Tests never touch the network: make Hugging Face libraries fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
