#!/usr/bin/env bash
# ReBN (gamma 0.9) on game:GuessTheNumber-v0-hard (1-50, 7 turns) with a larger byte-level GPT on
# one GPU, in under 8 minutes: random-agent traces, an SFT warm start, BUDGET seconds of RL, and an
# evaluation on 1,000 fresh episodes (sampled and greedy). Results (CSV, summary, curves) go to
# $OUT, else docs/results/gpu_hard.
#
#   bash benchmarks/gpu_hard.sh                 # on a machine with a GPU (fails early without one)
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_hard.sh   # the same steps in ~1 minute on a CPU
#
# Without a .venv it runs the source tree with python3 (a machine that has torch, numpy and
# matplotlib, as the device machines do). Settings: 4 layers, width 256, 8 heads (~3.3M
# parameters), 1,024 positions (a 7-turn episode takes ~750 byte tokens), 256 episodes per
# update, RL lr 1e-3 with a 20-update warm-up and cosine decay.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DEVICE=${DEVICE:-cuda}
OUT_DIR=${OUT:-docs/results/gpu_hard}
BUDGET=${BUDGET:-300}
WORK=${WORK:-runs/gpu_hard}
SFT_STEPS=300 EVAL=1000 EPU=256 LAYERS=4 WIDTH=256 HEADS=8 THREADS=4
if [[ -n "${SMOKE:-}" ]]; then  # tiny sizes, a fresh work folder (full runs resume)
    BUDGET=20 SFT_STEPS=10 EVAL=64 EPU=16 LAYERS=2 WIDTH=32 HEADS=2 THREADS=1
    WORK=$(mktemp -d)
    OUT_DIR=${OUT:-$WORK/results}
fi
if [[ "$DEVICE" == cuda* ]]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || {
        echo "no GPU visible to torch: run on a machine with one, or DEVICE=cpu SMOKE=1" >&2
        exit 2
    }
    "$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "torch", torch.__version__)'
fi
start=$(date +%s)
timeout 470 "$PY" benchmarks/train_game.py \
    --env game:GuessTheNumber-v0-hard --runs rebn-g0.9:0 \
    --n-layer "$LAYERS" --n-embd "$WIDTH" --n-head "$HEADS" --n-positions 1024 \
    --episodes-per-update "$EPU" --sft-steps "$SFT_STEPS" --sft-lr 1e-3 \
    --lr 1e-3 --warmup-updates 20 --lr-schedule cosine --budget "$BUDGET" \
    --eval-episodes "$EVAL" --device "$DEVICE" --threads "$THREADS" \
    --out "$OUT_DIR" --work "$WORK"
echo "total wall time: $(( $(date +%s) - start )) s"
