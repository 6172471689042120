"""Multi-turn GRPO with TRL on gemgym envs; writes a reward curve.

    python examples/trl/train.py                                  # tiny model, CPU: learns (3-4 min)
    python examples/trl/train.py --seed 1                         # another model init, tasks, samples
    python examples/trl/train.py --env math --steps 3             # GSM8K with the Python tool
    python examples/trl/train.py --env qa --steps 3               # HotpotQA with BM25 search
    python examples/trl/train.py --env guess,math --steps 20      # one run mixing two envs
    python examples/trl/train.py --model /path/to/Qwen2.5-0.5B-Instruct --steps 100 --max-tokens 256

Without ``--model`` it builds a tiny random-initialised chat model (no download) and first
gives it a short format warm-up: 80 ``trl.SFTTrainer`` steps (``--warmup-steps``) on random
valid replies (``\boxed{N}`` for GuessTheNumber). The warm-up is short on purpose: the model
then writes a readable guess in only some of its turns, so the episodes of a GRPO group end
differently (a format error ends an episode with -0.1; readable guesses go on to a win or
partial credit), GRPO's advantages are not 0, and 40 updates of 32 episodes (4 tasks x 8) raise
the mean env return (docs/integrations.md gives the figures of 3 seeds). With ``--model`` (any
local Hugging Face causal LM with a chat template) there is no warm-up unless asked for.
Output in ``--out``: ``curve.png`` and ``curve.json`` (per update: mean env return, loss,
gradient norm, success and format-error shares, turns) and ``episodes.jsonl`` (every episode,
token for token, as :class:`gemgym.llm.TokenEpisode` lines).
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
    ap.add_argument("--steps", type=int, default=40, help="GRPO updates")
    ap.add_argument("--group", type=int, default=8, help="episodes per task (GRPO group)")
    ap.add_argument("--tasks-per-step", type=int, default=4, help="tasks (groups) per update")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=12, help="tokens per turn")
    ap.add_argument("--lr", type=float, default=None, help="default: 3e-3 tiny, 1e-6 --model")
    ap.add_argument(
        "--lr-warmup", type=int, default=5, help="updates of linear learning-rate warm-up"
    )
    ap.add_argument("--advantage", default="grpo", help="grpo, rebn, rebn_group, reinforce, ...")
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument(
        "--warmup-steps", type=int, default=None, help="format SFT steps first (default: 80 tiny)"
    )
    ap.add_argument("--warmup-lr", type=float, default=None, help="default: 1e-2 tiny, 1e-4")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=0, help="model init, warm-up, tasks, sampling")
    ap.add_argument("--out", default="runs/trl")
    args = ap.parse_args()

    import torch
    from transformers import TrainerCallback
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
    model = args.model or str(build_tiny_chat_model(tmp / "tiny", "chatml", seed=args.seed))
    tiny = args.model is None
    warmup = args.warmup_steps if args.warmup_steps is not None else (80 if tiny else 0)
    cpu = not torch.cuda.is_available()
    if warmup:
        choices = list(envs)

        def reply(row: dict[str, Any], rng: random.Random) -> str:
            return str(WARM_REPLIES[row["env"] if row["env"] in choices else choices[0]](rng))

        lr = args.warmup_lr if args.warmup_lr is not None else (1e-2 if tiny else 1e-4)
        model = warm_start(
            model,
            envs,
            reply,
            str(tmp / "warm"),
            steps=warmup,
            learning_rate=lr,
            seed=args.seed,
            use_cpu=cpu,
        )
        print(f"format warm-up: {warmup} SFT steps in {time.perf_counter() - t0:.1f}s")

    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=args.group * args.tasks_per_step,
        num_generations=args.group,
        max_steps=args.steps,
        max_completion_length=args.max_tokens,
        learning_rate=args.lr if args.lr is not None else (3e-3 if tiny else 1e-6),
        warmup_steps=args.lr_warmup,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=cpu,
        seed=args.seed,
    )
    episodes: list[TokenEpisode] = []
    curve: list[dict[str, Any]] = []
    per_step = args.group * args.tasks_per_step

    class Progress(TrainerCallback):  # type: ignore[misc]
        """One line per update, as TRL logs it: the env's mean return and the episodes'."""

        def on_log(self, _args: Any, state: Any, _control: Any, logs: Any = None, **_: Any) -> None:
            if not logs or "reward" not in logs:
                return
            k = len(curve)
            eps = episodes[k * per_step : (k + 1) * per_step]
            n = max(1, len(eps))
            curve.append(
                {
                    "update": k + 1,
                    "mean_return": round(float(logs["reward"]), 4),
                    "loss": float(logs.get("loss", 0.0)),
                    "grad_norm": float(logs.get("grad_norm", 0.0)),
                    "success": sum(e.success for e in eps) / n,
                    "format_errors": sum(_format_error(e) for e in eps) / n,
                    "turns": sum(len(e.turns) for e in eps) / n,
                    "time_s": round(time.perf_counter() - t0, 1),
                }
            )
            print(json.dumps(curve[-1]), flush=True)

    trainer = GemgymGRPOTrainer(
        model,
        envs,
        config,
        num_tasks=max(64, args.steps * args.tasks_per_step),
        task_seed=1000 * args.seed,
        max_turns=args.max_turns,
        advantage=args.advantage,
        gamma=args.gamma,
        episode_log=episodes,
        callbacks=[Progress()],
    )
    trainer.train()
    (out / "curve.json").write_text(json.dumps(curve, indent=1))
    write_token_jsonl(episodes, out / "episodes.jsonl")
    _plot(curve, out / "curve.png", f"TRL GRPO on {args.env}")
    print(f"{len(curve)} updates, {len(episodes)} episodes in {time.perf_counter() - t0:.1f}s")
    if curve:
        k = min(5, len(curve))
        head = sum(c["mean_return"] for c in curve[:k]) / k
        tail = sum(c["mean_return"] for c in curve[-k:]) / k
        print(
            f"mean return: update 1 {curve[0]['mean_return']:+.3f}, update {len(curve)} "
            f"{curve[-1]['mean_return']:+.3f}; first {k} updates {head:+.3f}, last {k} {tail:+.3f}"
        )
    print(f"wrote {out / 'curve.png'}, {out / 'curve.json'}, {out / 'episodes.jsonl'}")


def _format_error(episode: Any) -> bool:
    """Whether the env could not read one of the episode's actions."""
    return any(t.info.get("format_error") for t in episode.turns)


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
