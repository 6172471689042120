"""Write a verl dataset of gemgym tasks (parquet) for the ``gemgym`` agent loop.

    python examples/verl/make_data.py --envs guess --n 1024 --out gemgym_train.parquet
    python examples/verl/make_data.py --envs guess,math,qa --n 1024 --out mixed.parquet

Each row: ``prompt`` (the first observation as chat messages, what verl logs), ``agent_name``
``gemgym``, ``data_source`` (the env) and ``extra_info`` ``{"env", "seed"}``. Then train with
verl's ``main_ppo`` and ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` pointing at
``examples/verl/agent_loop.yaml`` (see docs/integrations.md).
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--envs", default="guess", help="comma-separated presets (guess, math, qa) or env ids"
    )
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="gemgym_train.parquet")
    args = ap.parse_args()

    import pandas as pd

    from gemgym.integrations.common import named_envs, task_rows

    rows = task_rows(named_envs(args.envs), args.n, seed=args.seed)
    table = [
        {
            "prompt": r["prompt"],
            "agent_name": "gemgym",
            "data_source": r["env"],
            "extra_info": {"env": r["env"], "seed": r["seed"]},
        }
        for r in rows
    ]
    pd.DataFrame(table).to_parquet(args.out)
    print(f"wrote {len(table)} rows to {args.out}")


if __name__ == "__main__":
    main()
