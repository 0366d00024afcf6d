#!/bin/bash
# The prepared GPU check: trainer and embedded-engine throughput on one GPU, nothing downloaded.
# Needs python with torch (CUDA), transformers and safetensors; looprl's trainer also imports pydantic
# and loguru, its engine loguru (measured in-process: no fastapi/uvicorn). When missing they are
# installed offline from .device-wheels/ (README "Scaling up"). Without CUDA it reports "no CUDA device".
#   bash bench/gpu_check.sh [OUT.json] [extra bench/gpu_check.py args]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-.}/gpu_check.json}"
shift || true
python=${PYTHON:-python}
if ! "$python" -c "import pydantic, loguru" 2>/dev/null; then
  [ -d .device-wheels ] || { echo "pydantic/loguru missing and no .device-wheels/ to install them from" >&2; exit 2; }
  "$python" -m pip install --quiet --no-index --find-links .device-wheels pydantic loguru
fi
PYTHONPATH=src timeout 470 "$python" bench/gpu_check.py --out "$out" "$@"
