"""Tinker cookbook: its own rollout and data code plays gemgym envs (no Tinker service).

The cookbook's ``do_group_rollout`` plays :class:`GemgymEnvGroupBuilder` groups, rendered by the
cookbook's ``qwen3_instruct`` renderer, with a token completer over gemgym's transformers
backend standing in for the Tinker sampler; its ``compute_advantages`` and
``assemble_training_data`` then make the training data.
"""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest

from helpers.extras import needs_module

needs_module("tinker_cookbook", "tinker")
pytestmark = pytest.mark.tinker

from tinker_cookbook.rl.data_processing import (  # noqa: E402
    assemble_training_data,
    compute_advantages,
)
from tinker_cookbook.rl.rollouts import do_group_rollout  # noqa: E402

from gemgym.integrations.common import TextEpisode, resolve_envs  # noqa: E402
from gemgym.integrations.tinker import BackendTokenCompleter, GemgymRLDataset  # noqa: E402
from gemgym.llm.backend import SamplingParams  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from gemgym.llm.transformers_backend import TransformersBackend  # noqa: E402


def test_cookbook_rollouts_on_mixed_gemgym_envs(tmp_path: Path) -> None:
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml")
    envs = {"guess": "game:GuessTheNumber-v0-easy", "sudoku": "game:Sudoku-v0-easy"}
    data = GemgymRLDataset(
        envs,
        batch_size=2,
        num_batches=2,
        group_size=3,
        renderer_name="qwen3_instruct",
        tokenizer=str(model),
        max_turns=3,
    )
    batch = data.get_batch(0)
    assert len(data) == 2 and [b.env for b in batch] == list(envs.values())
    assert pickle.loads(pickle.dumps(batch[0])).seed == batch[0].seed  # builders pickle

    backend = TransformersBackend(str(model))
    policy = BackendTokenCompleter(backend, SamplingParams(max_tokens=12, seed=0))

    async def play() -> list:
        try:
            return list(await asyncio.gather(*(do_group_rollout(b, policy) for b in batch)))
        finally:
            await backend.aclose()

    groups = asyncio.run(play())
    assert [len(g.trajectories_G) for g in groups] == [3, 3]
    for builder, group in zip(batch, groups, strict=True):
        factory = resolve_envs(builder.env)[builder.env]
        for traj in group.trajectories_G:
            assert 1 <= len(traj.transitions) <= 3
            # the rewards are the env's: replay the decoded actions in a fresh env
            episode = TextEpisode(factory, seed=builder.seed)
            first = episode.reset()
            tokenizer = backend.tokenizer
            assert first in tokenizer.decode(traj.transitions[0].ob.to_ints())
            for t in traj.transitions:
                if episode.done:
                    break
                text = tokenizer.decode(t.ac.tokens, skip_special_tokens=True)
                assert t.reward == pytest.approx(episode.step(text).reward)
    advantages = compute_advantages(groups)
    datums, _ = assemble_training_data(groups, advantages)
    assert datums
    for d in datums:  # the loss covers sampled tokens only
        mask = d.loss_fn_inputs["mask"].to_numpy()
        assert 0 < mask.sum() < len(mask)
