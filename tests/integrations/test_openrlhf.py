"""OpenRLHF: its MultiTurnAgentExecutor plays gemgym envs through the agent-function interface.

OpenRLHF's own executor (``openrlhf.utils.agent``, installed with ``--no-deps``: only the agent
module is needed) runs the episode; gemgym's transformers backend stands in for its vLLM engine
(same call: prompt token ids in, ``outputs[0].token_ids/text/finish_reason/logprobs`` out).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers.extras import needs_module

needs_module("openrlhf.utils.agent", "openrlhf")
pytestmark = pytest.mark.openrlhf

from gemgym.integrations.common import TextEpisode, resolve_envs  # noqa: E402
from gemgym.integrations.openrlhf import make_agent_executor, write_dataset  # noqa: E402
from gemgym.llm.backend import GenerationRequest, SamplingParams  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from gemgym.llm.transformers_backend import TransformersBackend  # noqa: E402

from .conftest import VarietyEnv  # noqa: E402


class Engine:
    """vLLM's ``generate`` call shape over gemgym's transformers backend."""

    def __init__(self, backend: TransformersBackend, seed: int) -> None:
        self.backend = backend
        self.seed = seed
        self.calls = 0

    async def generate(self, ids: list[int], params: Any, multi_modal_data: Any = None) -> Any:
        self.calls += 1
        sampling = SamplingParams(
            max_tokens=min(12, params.max_tokens), seed=self.seed + self.calls
        )
        gen = await self.backend.generate(GenerationRequest(list(ids), (), sampling))
        lps = [
            {t: SimpleNamespace(logprob=lp)}
            for t, lp in zip(gen.token_ids, gen.logprobs or [], strict=True)
        ]
        out = SimpleNamespace(
            token_ids=gen.token_ids, text=gen.text, finish_reason=gen.finish_reason, logprobs=lps
        )
        return SimpleNamespace(outputs=[out])


def test_agent_executor_plays_gemgym_episodes(tmp_path: Path) -> None:
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml")
    data = tmp_path / "prompts.jsonl"
    envs = {"guess": "game:GuessTheNumber-v0-easy", "variety": VarietyEnv}
    write_dataset(data, envs, 4, str(model))
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    executor = make_agent_executor(envs=envs, tokenizer=str(model), max_turns=3)()
    backend = TransformersBackend(str(model))
    tok = backend.tokenizer

    async def run() -> list[dict[str, Any]]:
        try:
            outs = []
            for k, row in enumerate(rows):
                params = SimpleNamespace(max_tokens=12, logprobs=1)
                outs.append(
                    await executor.execute(
                        row["prompt"], row["label"], params, 4096, tok, Engine(backend, 10 * k)
                    )
                )
            return outs
        finally:
            await backend.aclose()

    outs = asyncio.run(run())
    assert max(len(o["action_ranges"]) for o in outs) == 3  # the variety env plays 3 turns
    factories = resolve_envs(envs)
    for row, out in zip(rows, outs, strict=True):
        label = json.loads(row["label"])
        ids = out["observation_tokens"]
        assert (
            ids[: len(tok(row["prompt"], add_special_tokens=False)["input_ids"])]
            == tok(row["prompt"], add_special_tokens=False)["input_ids"]
        )
        assert 1 <= len(out["action_ranges"]) <= 3
        assert len(out["rollout_log_probs"]) == len(ids)
        # the reward OpenRLHF got is the env's: replay the sampled actions
        episode = TextEpisode(factories[label["env"]], seed=label["seed"])
        episode.reset()
        for a, b in out["action_ranges"]:
            episode.step(tok.decode(ids[a:b], skip_special_tokens=True))
        assert out["reward"] == pytest.approx(episode.total_return)
        # between two actions: the template's turn end, the next observation, the prompt
        if len(out["action_ranges"]) > 1:
            between = tok.decode(ids[out["action_ranges"][0][1] : out["action_ranges"][1][0]])
            assert "<|im_start|>" in between and between.endswith("<|im_start|>assistant\n")
