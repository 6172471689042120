"""Stop ``gemgym train`` and resume it: what is lost, and the final evaluation against a run never
stopped (docs/rl.md, "Checkpoints, resume and interrupts").

Four runs of one small recipe (GuessTheNumber-easy: SFT on random-agent episodes, then ReBN γ 0.9,
60 updates of 32 episodes, a checkpoint every 10 updates, 1,000 evaluation episodes):

* ``whole``: never stopped;
* ``seed1``: never stopped, ``--seed 1`` (how far another seed lands: the noise);
* ``B``: Ctrl-C (SIGINT) during SFT, ``--resume``; SIGINT during RL, ``--resume`` to the end;
* ``C``: SIGKILL during RL (no handler runs: only the periodic checkpoint is left), ``--resume``.

Prints (and writes to ``OUT/result.json``) where each stop left the checkpoint and every run's
final evaluation; about 5 minutes of CPU::

    python benchmarks/train_interrupt.py --out runs/interrupt
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ENV = "game:GuessTheNumber-v0-easy"
RECIPE = ["--sft-steps", "100", "--sft-batch-size", "32", "--estimator", "rebn", "--gamma", "0.9"]
RECIPE += ["--updates", "60", "--episodes-per-update", "32", "--eval-episodes", "1000"]
RECIPE += ["--threads", "1", "--checkpoint-every", "10"]


def _gemgym(*args: str) -> list[str]:
    return [sys.executable, "-m", "gemgym", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _train(out: Path, sft: Path, *extra: str) -> list[str]:
    return _gemgym("train", ENV, "--sft", str(sft), *RECIPE, "--out", str(out), *extra)


def _finish(argv: list[str]) -> float:
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return round(time.monotonic() - t0, 1)


def _stop_at(argv: list[str], line_holds: str, sig: int) -> int:
    """Run ``argv``, send ``sig`` once a stdout line holds ``line_holds``; the exit status."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=_env()) as child:  # fmt: skip
        assert child.stdout is not None
        for line in child.stdout:
            if line_holds in line:
                child.send_signal(sig)
                break
        child.communicate()
    return child.returncode


def _saved(out: Path) -> dict[str, Any]:
    import torch

    state = torch.load(out / "checkpoint.pt", weights_only=False)
    return {k: state.get(k) for k in ("sft_step", "sft_done", "update")}


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "curves.csv", encoding="utf-8") as f:
        keys = ("update", "success", "mean_return", "loss")
        return [{k: r[k] for k in keys} for r in csv.DictReader(f)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/interrupt"))
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    sft = out / "random.jsonl"
    record = ["run", ENV, "--agent", "random", "--episodes", "500", "--out", str(sft), "--quiet"]
    if not sft.exists():  # seeded: the same 500 episodes every time
        _finish(_gemgym(*record))
    result: dict[str, Any] = {"recipe": RECIPE}
    for name in ("whole", "seed1", "B", "C"):
        if (out / name).exists():
            raise SystemExit(f"{out / name} exists: give another --out")
    result["whole_s"] = _finish(_train(out / "whole", sft))
    result["seed1_s"] = _finish(_train(out / "seed1", sft, "--seed", "1"))
    b = out / "B"
    result["B_sigint_sft_status"] = _stop_at(_train(b, sft), "SFT step 40/", signal.SIGINT)
    result["B_saved_after_sft_stop"] = _saved(b)
    result["B_sigint_rl_status"] = _stop_at(
        _train(b, sft, "--resume"), "update   25", signal.SIGINT
    )
    result["B_saved_after_rl_stop"] = _saved(b)
    _finish(_train(b, sft, "--resume"))
    c = out / "C"
    result["C_sigkill_status"] = _stop_at(_train(c, sft), "update   37", signal.SIGKILL)
    result["C_saved_after_kill"] = _saved(c)
    _finish(_train(c, sft, "--resume"))
    for name in ("whole", "seed1", "B", "C"):
        result[f"{name}_eval"] = json.loads((out / name / "final.json").read_text())["eval"]
    result["B_curve_equals_whole"] = _rows(b) == _rows(out / "whole")
    result["C_curve_equals_whole"] = _rows(c) == _rows(out / "whole")
    text = json.dumps(result, indent=1)
    (out / "result.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
