#!/usr/bin/env bash
# The trainer integrations on one GPU, each step bounded (whole script under 8 minutes): a
# random-initialised chat model of ~0.5B parameters (no download), then
#   tinker   : the cookbook's do_group_rollout + assemble_training_data on GuessTheNumber, the
#              model on the GPU through gemgym's transformers backend (examples/tinker/rollout.py)
#   openrlhf : OpenRLHF's MultiTurnAgentExecutor with the gemgym agent, same backend (its test)
#   verl     : the gemgym agent loop with verl's classes, same backend (its test)
# Frameworks missing on the machine are installed with --no-deps (interface modules only) into
# the running Python; a step whose framework cannot be installed is reported and skipped.
#
#   bash benchmarks/gpu_integrations.sh            # on a machine with a GPU
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_integrations.sh
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [[ "${DEVICE:-cuda}" == cuda* ]]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || {
        echo "no GPU visible to torch: run on a machine with one, or DEVICE=cpu SMOKE=1" >&2
        exit 2
    }
fi
WORK=$(mktemp -d)
if [[ -n "${SMOKE:-}" ]]; then SIZE="seed=0"; else
    SIZE="hidden_size=896, num_layers=24, num_heads=14, vocab_size=32000"; fi
"$PY" -c "from gemgym.llm.testing import build_tiny_chat_model as b; b('$WORK/model', 'chatml', $SIZE)"
status=0
step() { # step NAME IMPORT PIP_ARGS... -- COMMAND...
    local name=$1 mod=$2; shift 2
    local pip=(); while [[ $1 != -- ]]; do pip+=("$1"); shift; done; shift
    "$PY" -c "import $mod" 2>/dev/null || "$PY" -m pip install -q "${pip[@]}" || {
        echo "$name: could not install ${pip[*]}; skipped"; return; }
    local t0=$(date +%s)
    if timeout 150 "$@"; then echo "$name: ok in $(( $(date +%s) - t0 ))s"; else
        echo "$name: FAILED"; status=1; fi
}
step tinker tinker_cookbook --no-deps tinker-cookbook==0.6.1 chz tinker termcolor blobfile cloudpickle -- \
    "$PY" examples/tinker/rollout.py --model "$WORK/model" --max-tokens 64 --batches 2 --groups 4
step openrlhf openrlhf.utils.agent --no-deps openrlhf==0.11.2 aiohttp -- \
    "$PY" -m pytest -q -p no:cacheprovider tests/integrations/test_openrlhf.py
step verl verl.experimental.agent_loop.agent_loop --no-deps verl==0.9.1 hydra-core \
    "tensordict<=0.10.0,>=0.8.0" codetiming cachetools -- \
    "$PY" -m pytest -q -p no:cacheprovider tests/integrations/test_verl.py
exit $status
