#!/bin/bash
# The prepared GPU check (docs/scaling.md, "Checking a GPU machine"): the trainer's GPU paths on one GPU in one process, one JSON
# report, under 8 minutes on an H200, nothing downloaded. `--smoke` runs every stage on the CPU with a tiny
# model (what the test suite runs). Needs python with torch, transformers and safetensors; looprl's modules
# also import pydantic and loguru, which are installed offline from .device-wheels/ when missing.
#   bash bench/gpu_check.sh [--smoke] [--out FILE.json] [--model DIR] [--stages a,b]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
args=("$@")
[[ " $* " == *" --out "* ]] || args+=(--out "${OUT:-.}/gpu_check.json")
if ! "$python" -c "import pydantic, loguru" 2>/dev/null; then
  [ -d .device-wheels ] || { echo "pydantic/loguru missing and no .device-wheels/ to install them from" >&2; exit 2; }
  "$python" -m pip install --quiet --no-index --find-links .device-wheels pydantic loguru
fi
PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} timeout 470 "$python" bench/gpu_check.py "${args[@]}"
