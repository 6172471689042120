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


def test_the_cli_shows_it_as_one_line(tmp_path: Path) -> None:
    """``gemgym run`` of a dataset env offline: one ``gemgym: warning:`` line, no file, line
    number or source line (Python's form was two lines, the second a line of gemgym's code)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HF_DATASETS_CACHE", None)
    argv = [sys.executable, "-m", "gemgym", "run", "math:GSM8K", "--agent", "random"]
    argv += ["--episodes", "3", "--quiet", "--out", str(tmp_path / "t.jsonl")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "GSM8K" in line]
    assert len(warned) == 1 and warned[0].startswith("gemgym: warning: GSM8K: using gemgym's")
    assert len(warned[0]) <= 270 and "Warning" not in done.stderr
    assert "self._init_dataset" not in done.stderr and ".py:" not in done.stderr
