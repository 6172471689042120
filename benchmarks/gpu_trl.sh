#!/usr/bin/env bash
# TRL multi-turn GRPO on one GPU, in under 8 minutes: a random-initialised chat model of about
# Qwen2.5-0.5B's size (no download), a format warm-up (trl.SFTTrainer), then GRPO updates on
# GuessTheNumber through gemgym.integrations.trl. Curve and episodes go to $OUT (else
# runs/gpu_trl).
#
#   bash benchmarks/gpu_trl.sh                    # on a machine with a GPU (fails early without one)
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_trl.sh # the same steps with the tiny model on a CPU
BUILD_MODEL=1 source "$(dirname "$0")/_gpu_lib.sh"
framework trl trl "trl>=1.16" "datasets>=3.0"
OUT_DIR=${OUT:-runs/gpu_trl}
if [[ -n "${SMOKE:-}" ]]; then STEPS=2 TOKENS=12 GROUP=4; else STEPS=10 TOKENS=64 GROUP=8; fi
run_step gpu_trl 440 "$PY" examples/trl/train.py --model "$WORK/model" --warmup-steps 60 \
    --warmup-lr 3e-4 --lr 1e-5 --steps "$STEPS" --group "$GROUP" --tasks-per-step 4 \
    --max-tokens "$TOKENS" --threads 4 --out "$OUT_DIR" || exit 1
echo "curve in $OUT_DIR/curve.json"
