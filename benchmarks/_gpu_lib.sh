# Shared by the per-framework GPU scripts (benchmarks/gpu_<framework>.sh); source it.
# Sets PY (default: the .venv's Python, else python3), PYTHONPATH (the source tree), WORK (a
# temp dir), checks the GPU (DEVICE=cpu skips that), builds a random-initialised chat model in
# $WORK/model when BUILD_MODEL=1 (about Qwen2.5-0.5B's size; SMOKE=1: the tiny one), and defines
#   framework NAME IMPORT PIP_ARGS...   install the framework where it is missing (or exit 3)
#   run_step NAME SECONDS COMMAND...     run with a time limit, report "NAME: ok in Ns"/"FAILED"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -z "${PY:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [[ "${DEVICE:-cuda}" == cuda* ]]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || {
        echo "no GPU visible to torch: run on a machine with one, or DEVICE=cpu SMOKE=1" >&2
        exit 2
    }
    "$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "torch", torch.__version__)'
fi
WORK=$(mktemp -d)
if [[ -n "${BUILD_MODEL:-}" ]]; then
    if [[ -n "${SMOKE:-}" ]]; then SIZE="seed=0"; else
        SIZE="hidden_size=896, num_layers=24, num_heads=14, vocab_size=32000"; fi
    "$PY" -c "from gemgym.llm.testing import build_tiny_chat_model as b; b('$WORK/model', 'chatml', $SIZE)"
fi

framework() { # framework NAME IMPORT PIP_ARGS...
    local name=$1 mod=$2; shift 2
    "$PY" -c "import $mod" 2>/dev/null && return 0
    "$PY" -m pip install -q "$@" && return 0
    echo "$name: could not install $*; skipped"
    exit 3
}

run_step() { # run_step NAME SECONDS COMMAND...
    local name=$1 limit=$2; shift 2
    local t0; t0=$(date +%s)
    if timeout "$limit" "$@"; then
        echo "$name: ok in $(( $(date +%s) - t0 ))s"
    else
        echo "$name: FAILED"
        return 1
    fi
}
