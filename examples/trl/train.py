"""Multi-turn GRPO with TRL on gemgym envs; writes a reward curve.

    python examples/trl/train.py                                  # tiny random model, CPU, 3 updates
    python examples/trl/train.py --env math                       # GSM8K with the Python tool
    python examples/trl/train.py --env qa                         # HotpotQA with BM25 search
    python examples/trl/train.py --env guess,math --steps 20      # one run mixing two envs
    python examples/trl/train.py --model /path/to/Qwen2.5-0.5B-Instruct --steps 100 --max-tokens 256

Without ``--model`` it builds a tiny random-initialised chat model (no download) and first
teaches it the action format with a few ``trl.SFTTrainer`` steps (``--warmup-steps``), so the
GRPO updates see rewards that differ; with ``--model`` (any local Hugging Face causal LM with a
chat template) there is no warm-up unless asked for. Output in ``--out``: ``curve.png`` and
``curve.json`` (mean env return and loss per update) and ``episodes.jsonl`` (every episode, token
for token, as :class:`gemgym.llm.TokenEpisode` lines).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(var, "1")

WARM_REPLIES = {
    "guess": lambda rng: f"\\boxed{{{rng.randint(1, 10)}}}",
    "math": lambda rng: f"<python>print({rng.randint(1, 99)} * {rng.randint(1, 9)})</python>",
    "qa": lambda rng: "<search> python heap queue </search>",
}


def main() -> None:
    from gemgym.integrations.common import PRESETS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", help="a local HF model directory (default: a tiny random model)")
    ap.add_argument("--env", default="guess", help=f"comma-separated presets: {list(PRESETS)}")
    ap.add_argument("--steps", type=int, default=3, help="GRPO updates")
    ap.add_argument("--group", type=int, default=4, help="episodes per task (GRPO group)")
    ap.add_argument("--tasks-per-step", type=int, default=2, help="tasks (groups) per update")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=12, help="tokens per turn")
    ap.add_argument("--lr", type=float, default=None, help="default: 1e-3 tiny, 1e-6 --model")
    ap.add_argument("--advantage", default="grpo", help="grpo, rebn, rebn_group, reinforce, ...")
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument("--warmup-steps", type=int, default=None, help="format SFT steps first")
    ap.add_argument("--warmup-lr", type=float, default=None, help="default: 5e-2 tiny, 1e-4")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", default="runs/trl")
    args = ap.parse_args()

    import torch
    from trl import GRPOConfig

    from gemgym.integrations.common import preset_envs
    from gemgym.integrations.trl import GemgymGRPOTrainer, warm_start
    from gemgym.llm.record import TokenEpisode, write_token_jsonl
    from gemgym.llm.testing import build_tiny_chat_model

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    envs = preset_envs(args.env)
    tmp = Path(tempfile.mkdtemp(prefix="gemgym-trl-"))
    model = args.model or str(build_tiny_chat_model(tmp / "tiny", "chatml"))
    tiny = args.model is None
    warmup = args.warmup_steps if args.warmup_steps is not None else (40 if tiny else 0)
    cpu = not torch.cuda.is_available()
    if warmup:
        choices = list(envs)

        def reply(row: dict[str, Any], rng: random.Random) -> str:
            return str(WARM_REPLIES[row["env"] if row["env"] in choices else choices[0]](rng))

        lr = args.warmup_lr if args.warmup_lr is not None else (5e-2 if tiny else 1e-4)
        model = warm_start(
            model, envs, reply, str(tmp / "warm"), steps=warmup, learning_rate=lr, use_cpu=cpu
        )
        print(f"format warm-up: {warmup} SFT steps in {time.perf_counter() - t0:.1f}s")

    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=args.group * args.tasks_per_step,
        num_generations=args.group,
        max_steps=args.steps,
        max_completion_length=args.max_tokens,
        learning_rate=args.lr if args.lr is not None else (1e-3 if tiny else 1e-6),
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=cpu,
        seed=0,
    )
    episodes: list[TokenEpisode] = []
    trainer = GemgymGRPOTrainer(
        model,
        envs,
        config,
        num_tasks=max(64, args.steps * args.tasks_per_step),
        max_turns=args.max_turns,
        advantage=args.advantage,
        gamma=args.gamma,
        episode_log=episodes,
    )
    trainer.train()
    per_step = args.group * args.tasks_per_step
    curve = []
    for k, h in enumerate(h for h in trainer.state.log_history if "reward" in h):
        eps = episodes[k * per_step : (k + 1) * per_step]
        curve.append(
            {
                "update": k + 1,
                "mean_return": h["reward"],
                "loss": h["loss"],
                "success": sum(e.success for e in eps) / max(1, len(eps)),
                "turns": sum(len(e.turns) for e in eps) / max(1, len(eps)),
            }
        )
        print(json.dumps(curve[-1]))
    (out / "curve.json").write_text(json.dumps(curve, indent=1))
    write_token_jsonl(episodes, out / "episodes.jsonl")
    _plot(curve, out / "curve.png", f"TRL GRPO on {args.env}")
    print(f"{len(curve)} updates, {len(episodes)} episodes in {time.perf_counter() - t0:.1f}s")
    print(f"wrote {out / 'curve.png'}, {out / 'curve.json'}, {out / 'episodes.jsonl'}")


def _plot(curve: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([c["update"] for c in curve], [c["mean_return"] for c in curve], marker="o")
    ax.set_xlabel("update")
    ax.set_ylabel("mean env return")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
