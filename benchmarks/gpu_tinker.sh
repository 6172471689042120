#!/usr/bin/env bash
# Tinker cookbook on one GPU (under 8 minutes): the cookbook's do_group_rollout and
# assemble_training_data on GuessTheNumber, a ~0.5B random chat model on the GPU through
# gemgym's transformers backend standing in for the Tinker sampler (examples/tinker/rollout.py).
# Training itself runs on the Tinker service (an API key), not here.
#   bash benchmarks/gpu_tinker.sh                  # on a machine with a GPU
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_tinker.sh
BUILD_MODEL=1 source "$(dirname "$0")/_gpu_lib.sh"
framework tinker tinker_cookbook --no-deps tinker-cookbook==0.6.1 chz tinker termcolor blobfile \
    cloudpickle
run_step tinker 420 "$PY" examples/tinker/rollout.py --model "$WORK/model" --max-tokens 64 \
    --batches 2 --groups 4
