#!/usr/bin/env bash
# verl on one GPU (under 8 minutes): the gemgym agent loop with verl's own classes
# (tests/integrations/test_verl.py), the model on the GPU through gemgym's transformers backend
# standing in for verl's server manager. main_ppo (vLLM/SGLang servers, FSDP) is not run here.
#   bash benchmarks/gpu_verl.sh                    # on a machine with a GPU
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_verl.sh
source "$(dirname "$0")/_gpu_lib.sh"
framework verl verl.experimental.agent_loop.agent_loop --no-deps verl==0.9.1 hydra-core \
    "tensordict<=0.10.0,>=0.8.0" codetiming cachetools
run_step verl 420 "$PY" -m pytest -q -p no:cacheprovider tests/integrations/test_verl.py
