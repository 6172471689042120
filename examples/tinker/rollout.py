"""Tinker cookbook rollouts of gemgym envs, sampled from a local model (no Tinker service).

    python examples/tinker/rollout.py                      # GuessTheNumber, tiny random model
    python examples/tinker/rollout.py --env math           # GSM8K with the Python tool
    python examples/tinker/rollout.py --env qa             # HotpotQA with search
    python examples/tinker/rollout.py --env guess,math --model /path/to/Qwen3-4B-Instruct-2507

Plays ``--batches`` batches of a GemgymRLDataset with the cookbook's ``do_group_rollout`` (its
``qwen3_instruct`` renderer by default), then builds the training data with the cookbook's
``compute_advantages`` and ``assemble_training_data``: what ``tinker_cookbook.rl.train`` does
each step before sending the datums to the Tinker service.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(var, "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", help="a local HF model directory (default: a tiny random model)")
    ap.add_argument("--env", default="guess", help="comma-separated presets or env ids")
    ap.add_argument("--renderer", default="qwen3_instruct")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--groups", type=int, default=2, help="groups per batch")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()

    from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages
    from tinker_cookbook.rl.rollouts import do_group_rollout

    from gemgym.integrations.tinker import BackendTokenCompleter, GemgymRLDataset
    from gemgym.llm.backend import SamplingParams
    from gemgym.llm.testing import build_tiny_chat_model
    from gemgym.llm.transformers_backend import TransformersBackend

    model = args.model or str(build_tiny_chat_model(Path(tempfile.mkdtemp()) / "tiny", "chatml"))
    envs = {name: name for name in args.env.split(",")}
    data = GemgymRLDataset(
        envs,
        batch_size=args.groups,
        num_batches=args.batches,
        group_size=args.group_size,
        renderer_name=args.renderer,
        tokenizer=model,
        max_turns=4,
    )
    backend = TransformersBackend(model)
    policy = BackendTokenCompleter(backend, SamplingParams(max_tokens=args.max_tokens, seed=0))

    async def run() -> None:
        try:
            for i in range(len(data)):
                groups = await asyncio.gather(
                    *(do_group_rollout(b, policy) for b in data.get_batch(i))
                )
                datums, _ = assemble_training_data(groups, compute_advantages(groups))
                rewards = [
                    sum(t.reward for t in tr.transitions) for g in groups for tr in g.trajectories_G
                ]
                turns = [len(tr.transitions) for g in groups for tr in g.trajectories_G]
                print(
                    f"batch {i}: {len(rewards)} episodes, mean return "
                    f"{sum(rewards) / len(rewards):.3f}, mean turns {sum(turns) / len(turns):.2f}, "
                    f"{len(datums)} training datums"
                )
        finally:
            await backend.aclose()

    asyncio.run(run())


if __name__ == "__main__":
    main()
