"""verifiers: its own evaluation (``vf-eval``) plays gemgym envs against a local model server.

Runs where verifiers 0.4 is installed and ``GEMGYM_VLLM_PYTHON`` names a Python with vLLM (the
OpenAI-compatible server; ``transformers serve`` 5.24 ends its streams without the ``[DONE]``
event verifiers' interception server waits for). Serves the tiny random-initialised chat model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.extras import needs_module

needs_module("verifiers.v1", "verifiers")
VLLM_PYTHON = os.environ.get("GEMGYM_VLLM_PYTHON")
pytestmark = [
    pytest.mark.verifiers,
    pytest.mark.skipif(not VLLM_PYTHON, reason="set GEMGYM_VLLM_PYTHON (a Python with vLLM)"),
]

from gemgym.integrations.common import TextEpisode, preset_envs  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from helpers.net import serve_process  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "verifiers"


def _vllm(model: Path) -> object:
    return lambda port: [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--seed",
        "0",
    ]


def test_vf_eval_plays_gemgym_envs(tmp_path: Path) -> None:
    # head size 64: what vLLM's CPU attention supports
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml", hidden_size=128, num_heads=2)
    out = tmp_path / "runs"
    with serve_process(
        _vllm(model),  # type: ignore[arg-type]
        timeout_s=600,
        log=tmp_path / "vllm.log",
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    ) as url:
        env = {**os.environ, "PYTHONPATH": str(EXAMPLES), "OPENAI_API_KEY": "local"}
        cmd = [
            str(Path(sys.executable).with_name("vf-eval")),
            "--env.taskset.id",
            "gemgym-env",
            "--env.taskset.envs",
            "guess",
            "--env.taskset.num-tasks",
            "2",
            "--env.taskset.max-turns",
            "3",
            "--model",
            "tiny",
            "--client.base-url",
            f"{url}/v1",
            "--client.api-key-var",
            "OPENAI_API_KEY",
            "--sampling.max-tokens",
            "16",
            "-n",
            "2",
            "-r",
            "2",
            "--no-push",
            "--no-rich",
            "-o",
            str(out),
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    records = [
        json.loads(line) for p in out.rglob("traces.jsonl") for line in p.read_text().splitlines()
    ]
    assert len(records) == 4  # 2 tasks x 2 rollouts
    guess = preset_envs("guess")["guess"]
    for record in records:
        assert record["ok"], record["errors"]
        trace = record["traces"][0]
        reward = trace["rewards"]["env_return"]["score"]
        replies = [
            n["message"]["content"] for n in trace["nodes"] if n["message"]["role"] == "assistant"
        ]
        assert 1 <= len(replies) <= 3
        assert trace["metrics"]["turns"] == len(replies)
        # replaying the model's replies in a fresh env gives the reward verifiers recorded
        episode = TextEpisode(guess, seed=record["task"]["data"]["info"]["seed"])
        episode.reset()
        for text in replies:
            episode.step(text or "")
        assert reward == pytest.approx(episode.total_return)
