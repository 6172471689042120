"""An env that falls back to its shipped sample says so in one short line, once per process and
dataset, with how to get the full data."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from gemgym.envs import dataset as _dataset
from gemgym.envs.dataset import DatasetSpec, DatasetWarning, load_items

SPEC = DatasetSpec("GSM8K", "axon-rl/GSM-8k", sample="math/gsm8k.jsonl")
OTHER = DatasetSpec("HotpotQA", "axon-rl/HotpotQA", sample="qa/hotpotqa.jsonl")


def test_one_short_warning_per_dataset_and_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_dataset, "_CACHE", {})
    monkeypatch.setattr(_dataset, "_WARNED", set())
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            load_items(None, spec=SPEC)
        load_items(None, spec=OTHER, required=("question", "answer"))
    messages = [str(w.message) for w in caught if w.category is DatasetWarning]
    assert len(messages) == 2  # once per dataset, however many envs load it
    first = messages[0]
    assert len(first) <= 250 and "\n" not in first
    assert first.startswith("GSM8K: ") and "axon-rl/GSM-8k" in first and "offline" in first
    assert "once online" in first and "dataset='file.jsonl'" in first
