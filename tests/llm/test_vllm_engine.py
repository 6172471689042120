"""An in-process vLLM engine (``VLLMEngineBackend``) against the transformers backend (greedy).

Runs only with ``-m vllm`` and ``GEMGYM_VLLM_PYTHON`` naming a Python that has vLLM: the
rollout runs there (``_vllm_engine_rollout.py``), the same rollout here with
:class:`TransformersBackend`; the episodes must match token for token, log-probs within 1e-4.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.extras import needs_module

needs_vllm_python = pytest.mark.skipif(
    not os.environ.get("GEMGYM_VLLM_PYTHON"),
    reason="set GEMGYM_VLLM_PYTHON to a Python with vLLM to run the vLLM engine test",
)

needs_module("transformers", "llm")

from gemgym.llm import TokenEpisode  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from gemgym.llm.transformers_backend import TransformersBackend  # noqa: E402

from ._vllm_engine_rollout import play  # noqa: E402

SRC = Path(__file__).parents[2] / "src"


@pytest.mark.vllm
@needs_vllm_python
def test_vllm_engine_backend_plays_the_same_episodes_as_transformers(tmp_path: Path) -> None:
    # head size 64: vLLM's CPU attention supports it
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml", hidden_size=128, num_heads=2)
    out = tmp_path / "vllm.json"
    env = {**os.environ, "PYTHONPATH": str(SRC), "VLLM_LOGGING_LEVEL": "WARNING"}
    run = subprocess.run(
        [
            os.environ["GEMGYM_VLLM_PYTHON"],
            str(Path(__file__).with_name("_vllm_engine_rollout.py")),
            str(model),
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["overlong"] == ["length", 0]
    want = play(TransformersBackend(str(model)))
    assert sum(len(e.turns) for e in want["counting"]) == 12
    for name, episodes in want.items():
        vllm_eps = [TokenEpisode.from_dict(d) for d in got["episodes"][name]]
        assert len(vllm_eps) == len(episodes)
        for a, b in zip(vllm_eps, episodes, strict=True):
            assert a.finish_reason == b.finish_reason == "env_end"
            assert a.input_ids == b.input_ids and a.loss_mask == b.loss_mask
            assert a.rewards == b.rewards
            for ta, tb in zip(a.turns, b.turns, strict=True):
                assert ta.finish_reason == tb.finish_reason
                assert ta.logprobs is not None and tb.logprobs is not None
                assert max(abs(x - y) for x, y in zip(ta.logprobs, tb.logprobs, strict=True)) < 1e-4


def test_without_vllm_the_engine_backend_says_what_to_do() -> None:
    from importlib.util import find_spec

    from gemgym.errors import DependencyNotInstalled
    from gemgym.llm import VLLMEngineBackend

    if find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(DependencyNotInstalled, match=r"pip install vllm.*VLLMBackend"):
        VLLMEngineBackend(object())
