"""A real vLLM server against the transformers backend (greedy): same ids, same log-probs.

Runs only with ``-m vllm`` and ``GEMGYM_VLLM_PYTHON`` naming a Python that has vLLM (installed
apart from gemgym's environment, see ``benchmarks/vllm_parity.py``); it starts the server
(minutes on a CPU).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from helpers.extras import needs_module

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not os.environ.get("GEMGYM_VLLM_PYTHON"),
        reason="set GEMGYM_VLLM_PYTHON to a Python with vLLM to run the vLLM parity test",
    ),
]

needs_module("aiohttp", "llm-server")
needs_module("transformers", "llm")


def test_vllm_greedy_ids_and_logprobs_match_the_transformers_backend() -> None:
    path = Path(__file__).parents[2] / "benchmarks" / "vllm_parity.py"
    spec = importlib.util.spec_from_file_location("vllm_parity", path)
    assert spec is not None and spec.loader is not None
    parity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parity)
    result = parity.main(["--max-tokens", "16", "--episodes", "4", "--json"])
    assert result["errors"] == []
    assert result["identical_replies"] == result["prompts"] == len(parity.PROMPTS)
    assert result["max_abs_logprob_diff"] < 1e-4
    assert result["sampled_tokens"] > 0 and result["sampled_max_abs_logprob_diff"] < 1e-4
    assert result["rollout_identical_episodes"] == result["rollout_episodes"] == 4
