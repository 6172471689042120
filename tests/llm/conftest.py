"""Tiny random-initialised chat models (one per template family), built once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.extras import needs_module


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A model directory per template family (``chatml``, ``qwen2``, ``qwen3``, ``llama3``)."""
    torch = needs_module("torch", "llm")
    needs_module("transformers", "llm")
    needs_module("tokenizers", "llm")
    from gemgym.llm.testing import TEMPLATE_FAMILIES, build_tiny_chat_model

    # tiny models run fastest on one thread (the machine's cores are shared)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("tiny_models")
    yield {f: build_tiny_chat_model(root / f, f) for f in TEMPLATE_FAMILIES}
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny(tiny_models: dict[str, Path]) -> dict[str, tuple[Any, Any]]:
    """``family -> (model, tokenizer)``, loaded once."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return {
        f: (AutoModelForCausalLM.from_pretrained(p), AutoTokenizer.from_pretrained(p))
        for f, p in tiny_models.items()
    }
