"""Run in a Python with vLLM and Oat: Oat's actor ``init`` builds a real ``vllm.LLM`` and the
gemgym actor collects experience through it (``VLLMEngineBackend``).

    python _oat_vllm_actor.py MODEL_DIR SAVE_DIR OUT.json

Writes, per episode: env name, seed, replies, rewards, and each transition's ids and log-probs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/: the helpers package
    import _oat_standins

    standins = _oat_standins.install(engine=False)  # launchpad and plasma only: vLLM is real
    import vllm

    import gemgym
    from gemgym.integrations.oat import GemgymOatActor, GemgymOatArgs
    from helpers.envs import CountingEnv

    gemgym.register("oat-test:Counting-v0", lambda: CountingEnv(episode_length=3), override=True)
    model, save, out = sys.argv[1:4]
    args = GemgymOatArgs(
        pretrain=model,
        env="guess,oat-test:Counting-v0",
        num_envs=3,
        max_turns=3,
        rollout_batch_size_per_device=12,
        generate_max_length=12,
        max_model_len=1024,
        gamma=0.9,
        oracle="",
        temperature=1.0,
    )
    # on vLLM's CPU backend gpu_memory_utilization is the share of host memory it reserves
    vllm_args = {
        "model": model,
        "dtype": "float32",
        "max_model_len": 1024,
        "gpu_memory_utilization": 0.15,
    }
    actor = GemgymOatActor(None, vllm_args, args)
    actor.init(0, save)
    assert isinstance(actor.llm, vllm.LLM)
    actor.ipc_client = _oat_standins.MemoryIPC()
    feedback = actor.ipc_client.deserialize_ipc(actor.step())
    episodes = [
        {
            "env": ep.env_id,
            "seed": ep.seed,
            "replies": [t.response for t in transitions],
            "rewards": [t.rewards for t in transitions],
            "input_ids": ep.input_ids,
            "transitions": [
                {
                    "prompt_ids": list(t.prompt_ids),
                    "response_ids": list(t.response_ids),
                    "logprobs": list(t.response_logprobs),
                    "done": t.done,
                }
                for t in transitions
            ],
        }
        for ep, transitions in zip(actor.last_episodes, feedback, strict=True)
    ]
    actor.close_envs()
    with open(out, "w") as f:
        json.dump(
            {
                "standins": standins,
                "vllm": vllm.__version__,
                "episodes": episodes,
                "info_keys": sorted(feedback[0][0].info),
            },
            f,
        )


if __name__ == "__main__":  # vLLM starts its engine in a spawned process
    main()
