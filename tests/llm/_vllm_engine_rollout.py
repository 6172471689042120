"""Run in a Python that has vLLM: greedy token rollouts through an in-process ``vllm.LLM``.

    python _vllm_engine_rollout.py MODEL_DIR OUT.json

Writes the episodes (``TokenEpisode.to_dict``) of two envs: GuessTheNumber and a three-turn
:class:`helpers.envs.CountingEnv` (every reply accepted, so episodes have several turns).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def play(backend: Any) -> dict[str, list[Any]]:
    """The rollouts both engines play: greedy, 4 episodes of each env."""
    from gemgym.llm import SamplingParams, rollout_tokens
    from helpers.envs import CountingEnv

    sampling = SamplingParams(temperature=0, max_tokens=12)
    return {
        "guess": rollout_tokens(
            "game:GuessTheNumber-v0-easy",
            backend,
            episodes=4,
            seed=3,
            batch_size=4,
            sampling=sampling,
            max_turns=3,
        ),
        "counting": rollout_tokens(
            CountingEnv(episode_length=3),
            backend,
            episodes=4,
            seed=5,
            batch_size=4,
            sampling=sampling,
        ),
    }


def main() -> None:
    import asyncio

    import vllm

    from gemgym.llm import SamplingParams
    from gemgym.llm.backend import GenerationRequest
    from gemgym.llm.vllm_engine import VLLMEngineBackend

    model, out = sys.argv[1], sys.argv[2]
    # on the CPU backend gpu_memory_utilization is the share of host memory vLLM reserves
    llm = vllm.LLM(
        model=model, dtype="float32", max_model_len=1024, seed=0, gpu_memory_utilization=0.15
    )
    backend = VLLMEngineBackend(llm)
    episodes = play(backend)
    # a prompt longer than the engine's context gets no tokens instead of failing the batch
    request = GenerationRequest([1] * 2000, (), SamplingParams(max_tokens=4))
    long = asyncio.run(backend.generate(request))
    with open(out, "w") as f:
        json.dump(
            {
                "episodes": {k: [e.to_dict() for e in v] for k, v in episodes.items()},
                "overlong": [long.finish_reason, len(long.token_ids)],
            },
            f,
        )


if __name__ == "__main__":  # vLLM starts its engine in a spawned process
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/: the helpers package
    main()
