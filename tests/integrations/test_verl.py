"""verl: the ``gemgym`` agent loop, registered the way verl registers agent loops, plays episodes.

verl 0.9.1 is installed with ``--no-deps`` (plus hydra-core, tensordict, codetiming,
cachetools): its agent-loop module imports, its registry resolves ``gemgym``, and the loop runs
with gemgym's transformers backend standing in for verl's server manager (same call: prompt ids
in, ``TokenOutput`` out).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helpers.extras import needs_module

needs_module("verl.experimental.agent_loop.agent_loop", "verl")
pytestmark = pytest.mark.verl

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    DictConfigWrap,
    _agent_loop_registry,
)
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from gemgym.integrations.common import TextEpisode, preset_envs, resolve_envs  # noqa: E402
from gemgym.integrations.verl import GemgymAgentLoop  # noqa: E402
from gemgym.llm.backend import GenerationRequest, SamplingParams  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from gemgym.llm.transformers_backend import TransformersBackend  # noqa: E402


class Server:
    """verl's ``server_manager.generate`` over gemgym's transformers backend."""

    def __init__(self, backend: TransformersBackend) -> None:
        self.backend = backend
        self.n = 0

    async def generate(
        self, *, request_id: str, prompt_ids: list[int], sampling_params: Any, **_: Any
    ) -> Any:
        self.n += 1
        params = SamplingParams(max_tokens=min(12, sampling_params["max_tokens"]), seed=self.n)
        gen = await self.backend.generate(GenerationRequest(prompt_ids, (), params))
        return TokenOutput(token_ids=gen.token_ids, log_probs=gen.logprobs)


def test_agent_loop_plays_gemgym_episodes(tmp_path: Path) -> None:
    assert _agent_loop_registry["gemgym"]["_target_"].endswith("verl.GemgymAgentLoop")
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml")
    backend = TransformersBackend(str(model))
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 1024,
                    "response_length": 256,
                    "multi_turn": {"max_assistant_turns": 3},
                }
            }
        }
    )
    loop = GemgymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=Server(backend),
        tokenizer=backend.tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(OmegaConf.create({})),
    )
    rows = [{"env": "guess", "seed": 3}, {"env": "game:Sudoku-v0-easy", "seed": 4}]

    async def run() -> list[Any]:
        try:
            return [await loop.run({"temperature": 1.0}, extra_info=r) for r in rows]
        finally:
            await backend.aclose()

    try:
        outs = asyncio.run(run())
    finally:
        loop.loop.close()  # the event loop verl's AgentLoopBase made for itself
    tok = backend.tokenizer
    assert max(o.num_turns for o in outs) >= 3  # at least one turn each, prompt included
    for row, out in zip(rows, outs, strict=True):
        assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
        assert 0 < sum(out.response_mask) <= len(out.response_mask)
        # replay: the actions are the masked-in spans, the reward is the env's return
        spans, cur = [], []
        for t, m in zip(out.response_ids, out.response_mask, strict=True):
            if m:
                cur.append(t)
            elif cur:
                spans.append(cur)
                cur = []
        spans += [cur] if cur else []
        name = row["env"]
        factory = preset_envs(name)[name] if name == "guess" else resolve_envs(name)[name]
        episode = TextEpisode(factory, seed=row["seed"])
        episode.reset()
        for ids in spans:
            episode.step(tok.decode(ids, skip_special_tokens=True))
        assert out.reward_score == pytest.approx(episode.total_return)


def test_the_readme_command_is_a_valid_verl_config(tmp_path: Path) -> None:
    import os
    import shlex
    import subprocess
    import sys

    import verl
    from hydra import compose, initialize_config_dir

    root = Path(__file__).parents[2]
    readme = (root / "examples" / "verl" / "README.md").read_text()
    [command] = [
        ln for ln in readme.splitlines() if ln.startswith("python -m verl.trainer.main_ppo")
    ]
    overrides = shlex.split(command)[3:]
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)  # unknown keys fail here
    agent = cfg.actor_rollout_ref.rollout.agent
    assert agent.default_agent_loop == "gemgym"
    [entry] = OmegaConf.load(root / agent.agent_loop_config_path)
    assert entry.name == "gemgym"
    assert entry._target_ == f"{GemgymAgentLoop.__module__}.{GemgymAgentLoop.__name__}"

    # the data the command trains on, written by the README's make_data command
    out = tmp_path / "train.parquet"
    run = subprocess.run(
        [
            sys.executable,
            str(root / "examples" / "verl" / "make_data.py"),
            "--envs",
            "guess,math",
            "--n",
            "4",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )
    assert run.returncode == 0, run.stderr
    import pandas as pd

    rows = pd.read_parquet(out).to_dict("records")
    assert [r["extra_info"]["env"] for r in rows] == ["guess", "math", "guess", "math"]
    assert {r["agent_name"] for r in rows} == {"gemgym"}
