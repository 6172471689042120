"""Train a small byte-level GPT on a game: ReBN vs GRPO vs REINFORCE, gamma 0.9 vs 1.0.

Every run starts from the same SFT warm start (on traces of the random agent by default, which
teach the format and not the strategy, or of the env's expert with ``--warm-start-agent oracle``;
it is trained once, evaluated, and shared by all runs), then trains on-policy for a fixed budget
of RL (``--updates`` updates, or ``--budget`` seconds), and is evaluated on fresh episodes.
Results go to ``--out`` (default ``docs/results``): one ``<env>_<config>-s<seed>.csv`` learning
curve per run, ``summary_<env>.json``, ``summary_<env>.md`` and ``curves_<env>.png`` (``<env>``
is the id without its prefix, e.g. ``GuessTheNumber-v0-easy``). The random agent's success
rate, measured in the same run, is the baseline the ratios are printed against.

    .venv/bin/python benchmarks/train_game.py                  # GuessTheNumber (hours on 2 cores)
    .venv/bin/python benchmarks/train_game.py --quick          # smoke run, ~2 minutes
    .venv/bin/python benchmarks/train_game.py --configs rebn-g0.9 --seeds 0 --budget 1200
    .venv/bin/python benchmarks/train_game.py --env game:Minesweeper-v0-easy --wrappers grid \
        --warm-start-agent oracle --configs rebn-g0.9 grpo --seeds 0 1 --updates 600
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import time
from pathlib import Path
from typing import Any

CONFIGS: dict[str, dict[str, Any]] = {
    "rebn-g0.9": {"estimator": "rebn", "gamma": 0.9, "group_size": 1},
    "rebn-g1.0": {"estimator": "rebn", "gamma": 1.0, "group_size": 1},
    "rebn-group-g0.9": {"estimator": "rebn_group", "gamma": 0.9, "group_size": 8},
    "grpo": {"estimator": "grpo", "gamma": 1.0, "group_size": 8},
    "reinforce-g0.9": {"estimator": "reinforce", "gamma": 0.9, "group_size": 1},
    "reinforce-g1.0": {"estimator": "reinforce", "gamma": 1.0, "group_size": 1},
}


def mistaken_expert(mistakes: float, seed: int) -> Any:
    """The env's expert, but each move is the random agent's with probability ``mistakes``:
    traces that also show the expert going on after a wrong move."""
    import random

    from gemgym.agents.builtin import _EnvAgent

    class MistakenExpert(_EnvAgent):
        name = "oracle"
        capability = "expert_action"

        def __init__(self) -> None:
            self.rng = random.Random(seed)

        def act(self, observations: Any, *, slots: Any, venv: Any) -> list[Any]:
            return [self._move(lambda name, i=i: venv.call(name, indices=[i])[0]) for i in slots]

        def act_batch(self, requests: Any) -> list[Any]:
            from gemgym.episodes.policy import Action

            return [Action(self._move(r.env.call), requests=0) for r in requests]

        def _move(self, call: Any) -> Any:
            wrong = self.rng.random() < mistakes
            return call("sample_random_action" if wrong else "expert_action")

    return MistakenExpert()


def agent_traces(
    env_id: str,
    agent: str,
    path: Path,
    episodes: int,
    *,
    env_kwargs: dict[str, Any],
    wrappers: str,
    mistakes: float = 0.0,
) -> dict[str, float]:
    """Traces of a built-in agent (``random``, ``oracle``; an oracle that errs with
    probability ``mistakes``) on the env as the trainer makes it (its kwargs and wrappers),
    written to ``path``; returns their summary."""
    from gemgym.agents import make_agent
    from gemgym.experience import rollout, summarize, write_jsonl
    from gemgym.wrappers.factory import get_wrapper_fns

    player = mistaken_expert(mistakes, 555) if mistakes > 0 else make_agent(agent)
    eps = list(
        rollout(
            env_id,
            player,
            episodes=episodes,
            seed=555_000_000,
            wrappers=get_wrapper_fns(wrappers) if wrappers else None,
            **env_kwargs,
        )
    )
    write_jsonl(eps, path)
    return summarize(eps)


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """One training run (in its own process); returns its final.json."""
    import warnings

    warnings.filterwarnings("ignore")
    from gemgym.rl.trainer import TrainConfig, Trainer

    cfg = TrainConfig.from_flags(**job["config"])  # one keyword per gemgym train flag
    t0 = time.strftime("%X")

    def log(msg: str) -> None:
        if job["verbose"]:
            print(f"[{job['name']}] {msg}", flush=True)

    final = Trainer(cfg, log=log).run(resume="auto")  # a rerun continues each run
    final["name"] = job["name"]
    final["started"] = t0
    return final


def ratio(success: float, baseline: float) -> float | None:
    """``success`` as a multiple of the random agent's (``None`` when that is 0)."""
    return success / baseline if baseline > 0 else None


def times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="game:GuessTheNumber-v0-easy")
    ap.add_argument(
        "--env-kwargs", type=json.loads, default=None, help="e.g. '{\"partial_credit\": false}'"
    )
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument(
        "--runs",
        nargs="+",
        default=None,
        metavar="CONFIG:SEED",
        help="an explicit list of runs, in order (instead of --configs x --seeds)",
    )
    ap.add_argument("--wrappers", default="", help="wrappers around the env, by name (e.g. grid)")
    ap.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of training per run (default 1200 unless --updates is given)",
    )
    ap.add_argument(
        "--updates", type=int, default=None, help="updates per run (the same on every machine)"
    )
    ap.add_argument(
        "--warm-start-agent",
        default="random",
        choices=["random", "oracle"],
        help="whose traces the SFT warm start imitates (oracle: the env's expert)",
    )
    ap.add_argument("--traces", type=int, default=2000, help="episodes of SFT traces")
    ap.add_argument(
        "--mistakes",
        type=float,
        default=0.0,
        help="with --warm-start-agent oracle: each traced move is the random agent's with this "
        "probability (traces that show play after a wrong move)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=16, help="tokens an action may have")
    ap.add_argument("--sft-steps", type=int, default=150)
    ap.add_argument("--sft-lr", type=float, default=3e-3, help="SFT warm start learning rate")
    ap.add_argument("--eval-episodes", type=int, default=1000)
    ap.add_argument(
        "--eval-every", type=int, default=0, help="evaluate 256 fresh episodes every N updates"
    )
    ap.add_argument("--lr", type=float, default=1e-3, help="RL learning rate")
    # batch reuse (PPO-clipped) was measured slower per update here: see docs/results.md,
    # section "What did not work"
    ap.add_argument("--epochs", type=int, default=1, help="passes over each collected batch")
    ap.add_argument(
        "--minibatches", type=int, default=1, help="AdamW steps per pass (PPO-clipped reuse)"
    )
    ap.add_argument("--warmup-updates", type=int, default=0, help="linear RL lr warm-up")
    ap.add_argument("--entropy-coef", type=float, default=0.0, help="entropy bonus (default 0)")
    ap.add_argument(
        "--entropy-ref-min",
        type=float,
        default=None,
        help="entropy bonus only where the warm start's entropy is >= this (nats)",
    )
    ap.add_argument(
        "--entropy-turns", type=int, default=None, help="entropy bonus only on the first K actions"
    )
    ap.add_argument("--entropy-schedule", default="constant", choices=["constant", "linear"])
    ap.add_argument(
        "--entropy-decay-until", type=float, default=1.0, help="share of the run (linear)"
    )
    ap.add_argument(
        "--entropy-target",
        type=float,
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="adapt the bonus so the moves' entropy (nats) follows START -> END over the run",
    )
    ap.add_argument("--entropy-target-lr", type=float, default=0.05)
    ap.add_argument(
        "--kl-coef", type=float, default=0.0, help="KL penalty toward the warm start (default 0)"
    )
    ap.add_argument("--kl-schedule", default="constant", choices=["constant", "linear"])
    ap.add_argument("--kl-decay-until", type=float, default=1.0)
    ap.add_argument(
        "--kl-estimator",
        default="k3",
        choices=["k3", "exact"],
        help="k3 (sampled tokens) or exact (whole vocabulary at every action token)",
    )
    ap.add_argument(
        "--temperature", type=float, default=1.0, help="training batches' sampling temperature"
    )
    ap.add_argument("--min-p", type=float, default=0.0, help="min-p sampling of training batches")
    ap.add_argument(
        "--eval-temperature",
        type=float,
        default=1.0,
        help="evaluation sampling temperature (default 1: the policy itself)",
    )
    ap.add_argument("--lr-schedule", default="constant", choices=["constant", "cosine"])
    ap.add_argument("--episodes-per-update", type=int, default=64)
    ap.add_argument(
        "--overlap",
        action="store_true",
        help="collect the next batch while learning on this one (two cores per run)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (one process each)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run")
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument(
        "--n-positions", type=int, default=512, help="context length (tokens) of the model"
    )
    ap.add_argument("--tokenizer", default="bytes", choices=["bytes", "words"])
    ap.add_argument("--obs-max-tokens", type=int, default=128)
    ap.add_argument(
        "--init",
        default=None,
        help="warm-start checkpoint to share instead of training the SFT (its weights only)",
    )
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--work", default="runs/train_game", help="checkpoints (resumable)")
    ap.add_argument("--quick", action="store_true", help="one short ReBN run (~2 minutes)")
    ap.add_argument("--verbose", action="store_true", help="log every update")
    args = ap.parse_args()
    if args.eval_episodes < 1:
        ap.error("--eval-episodes must be >= 1: the table reports each run's evaluation")
    if args.quick:
        args.configs, args.seeds = ["rebn-g0.9"], [0]
        args.budget, args.sft_steps, args.eval_episodes = 30.0, 60, 128
        args.out, args.work = "runs/train_game_quick/results", "runs/train_game_quick"
    out, work = Path(args.out), Path(args.work)
    if args.quick:  # a smoke run starts from scratch (full runs resume from their checkpoints)
        shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    tag = args.env.split(":")[-1]

    if args.budget is None and args.updates is None:
        args.budget = 1200.0
    env_kwargs = args.env_kwargs or {}
    t = time.perf_counter()
    traces = work / f"random_{tag}.jsonl"
    baseline = agent_traces(
        args.env, "random", traces, 2000, env_kwargs=env_kwargs, wrappers=args.wrappers
    )
    print(
        f"random agent on {args.env}: success {baseline['success_rate']:.1%}, mean turns "
        f"{baseline['mean_turns']:.2f} (2000 episodes, {time.perf_counter() - t:.1f} s)"
    )
    if args.mistakes and args.warm_start_agent != "oracle":
        ap.error("--mistakes is for --warm-start-agent oracle")
    if args.warm_start_agent != "random" or args.traces != 2000:
        mistakes = f"_mistakes{args.mistakes:g}" if args.mistakes else ""
        traces = work / f"{args.warm_start_agent}{mistakes}_{tag}.jsonl"
        demo = agent_traces(
            args.env,
            args.warm_start_agent,
            traces,
            args.traces,
            env_kwargs=env_kwargs,
            wrappers=args.wrappers,
            mistakes=args.mistakes,
        )
        print(
            f"{args.warm_start_agent} traces for the warm start: success "
            f"{demo['success_rate']:.1%}, mean turns {demo['mean_turns']:.2f} "
            f"({args.traces} episodes)"
        )
    common = {
        "env_id": args.env,
        "env_kwargs": env_kwargs,
        "wrappers": args.wrappers,
        "max_new_tokens": args.max_new_tokens,
        "eval_episodes": args.eval_episodes,
        "threads": args.threads,
        "n_layer": args.n_layer,
        "n_embd": args.n_embd,
        "n_head": args.n_head,
        "n_positions": args.n_positions,
        "tokenizer": args.tokenizer,
        "obs_max_tokens": args.obs_max_tokens,
        "device": args.device,
    }
    sft_dir = work / tag / "sft"
    sft_config: dict[str, Any] = {**common, "out": str(sft_dir), "updates": 0}
    if args.init:  # a given warm start, evaluated like a trained one
        sft_config["init"] = args.init
    else:
        sft_config.update(sft=str(traces), sft_steps=args.sft_steps, sft_lr=args.sft_lr)
    sft_job = {"name": "sft", "verbose": args.verbose, "config": sft_config}

    def report_sft(sft: dict[str, Any]) -> None:
        what = (
            f"from {args.init}" if args.init else f"{args.sft_steps} steps, {sft['train_time_s']} s"
        )
        print(
            f"SFT warm start ({what}): success "
            f"{sft['eval']['success_rate']:.1%}, mean turns {sft['eval']['mean_turns']:.2f} "
            f"({sft['eval']['episodes']} episodes)"
        )

    if not args.init:  # the runs start from its checkpoint: train it first
        sft = run_one(sft_job)
        report_sft(sft)
    jobs = []
    if args.runs:
        plan = []
        for item in args.runs:
            name, _, seed_text = item.partition(":")
            if name not in CONFIGS or not seed_text.isdigit():
                ap.error(f"--runs takes CONFIG:SEED with CONFIG in {list(CONFIGS)}, got {item!r}")
            plan.append((name, int(seed_text)))
    else:
        plan = [(name, seed) for name in args.configs for seed in args.seeds]
    for name, seed in plan:
        run = f"{name}-s{seed}"
        jobs.append(
            {
                "name": run,
                "verbose": args.verbose,
                "config": {
                    **CONFIGS[name],
                    **common,
                    "out": str(work / tag / run),
                    "seed": seed,
                    "time_budget": args.budget,
                    "updates": args.updates,
                    "lr": args.lr,
                    "epochs": args.epochs,
                    "minibatches": args.minibatches,
                    "episodes_per_update": args.episodes_per_update,
                    "warmup_updates": args.warmup_updates,
                    "entropy_coef": args.entropy_coef,
                    "entropy_ref_min": args.entropy_ref_min,
                    "entropy_turns": args.entropy_turns,
                    "entropy_schedule": args.entropy_schedule,
                    "entropy_decay_until": args.entropy_decay_until,
                    "entropy_target": tuple(args.entropy_target) if args.entropy_target else None,
                    "entropy_target_lr": args.entropy_target_lr,
                    "kl_coef": args.kl_coef,
                    "kl_schedule": args.kl_schedule,
                    "kl_decay_until": args.kl_decay_until,
                    "kl_estimator": args.kl_estimator,
                    "temperature": args.temperature,
                    "min_p": args.min_p,
                    "eval_every": args.eval_every,
                    "eval_temperature": args.eval_temperature,
                    "lr_schedule": args.lr_schedule,
                    "overlap": args.overlap,
                    "init": args.init or str(sft_dir / "checkpoint.pt"),
                },
            }
        )
    if args.init:  # a given warm start is only evaluated: beside the runs, not before them
        jobs.insert(0, sft_job)
    if args.jobs > 1:
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            finals = pool.map(run_one, jobs, chunksize=1)
    else:
        finals = [run_one(j) for j in jobs]
    if args.init:
        jobs, (sft, *finals) = jobs[1:], finals
        report_sft(sft)

    from gemgym.rl.trainer import plot_curves

    rows = []
    for job, final in zip(jobs, finals, strict=True):
        src = Path(job["config"]["out"]) / "curves.csv"
        shutil.copy(src, out / f"{tag}_{job['name']}.csv")
        ev = final["eval"]
        greedy = final.get("eval_greedy") or {}
        rows.append(
            {
                "run": job["name"],
                "updates": final["updates"],
                "train_time_s": final["train_time_s"],
                "eval_episodes": ev["episodes"],
                "success": ev["success_rate"],
                "mean_turns": ev["mean_turns"],
                "greedy_success": greedy.get("success_rate", float("nan")),
                "greedy_mean_turns": greedy.get("mean_turns", float("nan")),
                "vs_random": ratio(ev["success_rate"], baseline["success_rate"]),
            }
        )
    plot_curves(  # by update when the budget is in updates (runs in parallel share the cores)
        {r["run"]: out / f"{tag}_{r['run']}.csv" for r in rows},
        out / f"curves_{tag}.png",
        x="update" if args.updates else "time_s",
        window=25 if args.updates else 10,
    )
    summary = {
        "env": args.env,
        "budget_s": args.budget,
        "updates": args.updates,
        "wrappers": args.wrappers,
        "warm_start_agent": args.warm_start_agent,
        "random_agent": baseline,
        "sft": {
            "steps": args.sft_steps,
            "time_s": sft["train_time_s"],
            "eval": sft["eval"],
            "eval_greedy": sft.get("eval_greedy"),
        },
        "runs": rows,
    }
    (out / f"summary_{tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    sft_greedy = sft.get("eval_greedy") or {}
    lines = [
        "| run | updates | train s | eval episodes | success | mean turns | greedy success "
        "| greedy turns | × random |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| random agent | – | – | 2000 | {baseline['success_rate']:.1%} | "
        f"{baseline['mean_turns']:.2f} | – | – | 1.00 |",
        f"| SFT warm start | – | {sft['train_time_s']:.0f} | {sft['eval']['episodes']} | "
        f"{sft['eval']['success_rate']:.1%} | {sft['eval']['mean_turns']:.2f} | "
        f"{sft_greedy.get('success_rate', float('nan')):.1%} | "
        f"{sft_greedy.get('mean_turns', float('nan')):.2f} | "
        f"{times(ratio(sft['eval']['success_rate'], baseline['success_rate']))} |",
    ]
    lines += [
        f"| {r['run']} | {r['updates']} | {r['train_time_s']:.0f} | {r['eval_episodes']} | "
        f"{r['success']:.1%} | {r['mean_turns']:.2f} | {r['greedy_success']:.1%} | "
        f"{r['greedy_mean_turns']:.2f} | {times(r['vs_random'])} |"
        for r in rows
    ]
    (out / f"summary_{tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
