#!/bin/bash
# The prepared GPU check (docs/scaling.md, "Checking a GPU machine"): every GPU path of looprl on one machine,
# one JSON report, under 8 minutes on an H200, nothing downloaded. `--smoke` runs every stage on the CPU with a
# tiny model (what the test suite runs).
#   bash bench/gpu_check.sh [--smoke] [--out FILE.json] [--model DIR] [--stages a,b]
# Needs a python with torch, transformers, tokenizers and safetensors (PYTHON, default python3). Where that
# environment lacks looprl's other requirements (a bare GPU image: no pydantic, fastapi, ... and no network),
# they and looprl itself are installed offline from .device-wheels/ (`make device-wheels`, run where there is a
# network; LOOPRL_DEVICE_WHEELS names another folder) into a folder of their own (LOOPRL_DEVICE_SITE, default a
# fresh temporary one), so the image's torch and transformers stay the ones used; otherwise (a developer's venv)
# looprl runs from src/.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
args=("$@")
[[ " $* " == *" --out "* ]] || args+=(--out "${OUT:-.}/gpu_check.json")
requirements="import pydantic, pydantic_settings, loguru, fastapi, uvicorn, openai, httpx, aiohttp, peft, accelerate, rich"
if "$python" -c "$requirements" 2>/dev/null; then
  export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
else
  wheels=${LOOPRL_DEVICE_WHEELS:-.device-wheels}
  if [ ! -f "$wheels/SOURCE" ]; then
    echo "looprl's requirements are missing here and $wheels/ holds no wheels: run \`make device-wheels\` on a" \
      "machine with a network and bring the folder along" >&2
    exit 2
  fi
  if [ "$("$python" bench/device_wheels.py --digest)" != "$(cat "$wheels/SOURCE")" ]; then
    echo "$wheels/ was built from other sources than src/: run \`make device-wheels\` again" >&2
    exit 2
  fi
  site=${LOOPRL_DEVICE_SITE:-$(mktemp -d)/site}
  "$python" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check --upgrade --target "$site" \
    "$wheels"/*.whl
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  "$python" -c "$requirements; import looprl; print('looprl from', looprl.__file__)"
fi
limit=470  # the GPU run's budget; the CPU smoke on a busy 2-core machine takes longer
[[ " $* " == *" --smoke "* ]] && limit=1500
timeout $limit "$python" bench/gpu_check.py "${args[@]}"
