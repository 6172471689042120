#!/usr/bin/env bash
# TRL multi-turn GRPO on one GPU, in under 8 minutes: a random-initialised chat model of about
# Qwen2.5-0.5B's size (no download), a format warm-up (trl.SFTTrainer), then GRPO updates on
# GuessTheNumber through gemgym.integrations.trl. Curve and episodes go to $OUT (else
# runs/gpu_trl).
#
#   bash benchmarks/gpu_trl.sh                    # on a machine with a GPU (fails early without one)
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_trl.sh # the same steps with the tiny model on a CPU
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT_DIR=${OUT:-runs/gpu_trl}
"$PY" -c 'import trl' 2>/dev/null || "$PY" -m pip install -q "trl>=1.16" "datasets>=3.0"
if [[ "${DEVICE:-cuda}" == cuda* ]]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || {
        echo "no GPU visible to torch: run on a machine with one, or DEVICE=cpu SMOKE=1" >&2
        exit 2
    }
    "$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "torch", torch.__version__)'
fi
WORK=$(mktemp -d)
if [[ -n "${SMOKE:-}" ]]; then
    SIZE="" STEPS=2 TOKENS=12 GROUP=4
else  # about 0.5B parameters (Qwen2.5-0.5B's width and depth)
    SIZE="hidden_size=896, num_layers=24, num_heads=14, vocab_size=32000" STEPS=10 TOKENS=64 GROUP=8
fi
"$PY" -c "from gemgym.llm.testing import build_tiny_chat_model as b; b('$WORK/model', 'chatml', ${SIZE:-seed=0})"
start=$(date +%s)
timeout 440 "$PY" examples/trl/train.py --model "$WORK/model" --warmup-steps 60 --warmup-lr 3e-4 --lr 1e-5 \
    --steps "$STEPS" --group "$GROUP" --tasks-per-step 4 --max-tokens "$TOKENS" --threads 4 \
    --out "$OUT_DIR"
echo "gpu_trl: $(( $(date +%s) - start ))s; curve in $OUT_DIR/curve.json"
