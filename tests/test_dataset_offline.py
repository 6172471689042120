"""The first dataset load never probes the network itself: offline settings (HF_HUB_OFFLINE,
HF_DATASETS_OFFLINE, or the Hugging Face libraries' own flags) skip the Hub, and otherwise the
``datasets`` library is asked (and its failure falls back to the shipped sample)."""

from __future__ import annotations

import socket
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest

from gemgym.envs import dataset as _dataset
from gemgym.envs.dataset import DatasetSpec, DatasetWarning, load_items
from helpers.extras import needs_module

SPEC = DatasetSpec("GSM8K", "axon-rl/GSM-8k", sample="math/gsm8k.jsonl")


class NoNetwork(AssertionError):
    pass


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No dataset loaded yet in this process, an empty Hugging Face cache, no network."""
    monkeypatch.setattr(_dataset, "_CACHE", {})
    monkeypatch.setattr(_dataset, "_WARNED", set())
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise NoNetwork(f"a socket was opened: {args}")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "socket", no_network)


def _load() -> tuple[str, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = load_items(None, spec=SPEC)
    return items.origin, [str(w.message) for w in caught if w.category is DatasetWarning]


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_env_var_uses_the_sample_without_a_socket(
    fresh: None, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, "1")
    origin, warned = _load()
    assert origin == "sample math/gsm8k.jsonl"
    assert len(warned) == 1 and "offline" in warned[0]


def test_the_libraries_own_offline_flag_is_respected(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub read HF_HUB_OFFLINE when it was imported (or a program set its flag):
    that is the setting, even when the variable is not in the environment now."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delitem(sys.modules, "datasets.config", raising=False)
    constants = types.SimpleNamespace(HF_HUB_OFFLINE=True)
    monkeypatch.setitem(sys.modules, "huggingface_hub.constants", constants)  # type: ignore[arg-type]
    origin, warned = _load()
    assert origin == "sample math/gsm8k.jsonl"
    assert len(warned) == 1 and "offline" in warned[0]


def test_online_asks_the_datasets_library_instead_of_probing(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not offline: no probe of our own; ``datasets.load_dataset`` is asked, and when it fails
    (here: no route to the Hub) the sample is used, with the reason in the warning."""
    needs_module("datasets", "datasets")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    for module in ("huggingface_hub.constants", "datasets.config"):  # imported by then: online
        if module in sys.modules:
            monkeypatch.setattr(sys.modules[module], "HF_HUB_OFFLINE", False, raising=False)
            monkeypatch.setattr(sys.modules[module], "HF_DATASETS_OFFLINE", False, raising=False)
    asked: list[str] = []

    def load_dataset(path: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(path)
        raise ConnectionError("Couldn't reach the Hugging Face Hub")

    import datasets

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    origin, warned = _load()
    assert asked == ["axon-rl/GSM-8k"]
    assert origin == "sample math/gsm8k.jsonl"
    assert len(warned) == 1 and "Couldn't reach" in warned[0]
