#!/usr/bin/env bash
# OpenRLHF on one GPU (under 8 minutes): its MultiTurnAgentExecutor with the gemgym agent
# (tests/integrations/test_openrlhf.py), the model on the GPU through gemgym's transformers
# backend standing in for OpenRLHF's vLLM engines. train_ppo_ray (DeepSpeed, vLLM and Ray on
# several GPUs) is not run here.
#   bash benchmarks/gpu_openrlhf.sh                # on a machine with a GPU
#   DEVICE=cpu SMOKE=1 bash benchmarks/gpu_openrlhf.sh
source "$(dirname "$0")/_gpu_lib.sh"
framework openrlhf openrlhf.utils.agent --no-deps openrlhf==0.11.2 aiohttp
run_step openrlhf 420 "$PY" -m pytest -q -p no:cacheprovider tests/integrations/test_openrlhf.py
