#!/usr/bin/env bash
# Oat on one GPU (under 8 minutes): tests/integrations/test_oat.py with the model on the GPU
# (Oat's actor init and step collecting mixed-env episodes, Oat's learner building PPO data and
# evaluating), and, where vLLM is installed, the same actor sampling through the vLLM engine
# Oat's own init builds. A whole Oat program (launchpad, DeepSpeed learners) cannot start on
# Python 3.11: dm-launchpad has builds up to 3.10 only (docs/integrations.md).
#   bash benchmarks/gpu_oat.sh                     # on a machine with a GPU
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_oat.sh
source "$(dirname "$0")/_gpu_lib.sh"
"$PY" -c "import oat.types" 2>/dev/null || PYTHON="$PY" scripts/install-oat || {
    echo "oat: could not install; skipped"; exit 3; }
if "$PY" -c "import vllm" 2>/dev/null; then export GEMGYM_VLLM_PYTHON="$PY"; fi
run_step oat 420 "$PY" -m pytest -q -p no:cacheprovider tests/integrations/test_oat.py
