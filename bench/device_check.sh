#!/bin/bash
# `make device-check`: the bootstrap of `bench/gpu_check.sh` from a bare image, tested on the CPU (docs/scaling.md,
# "Checking a GPU machine"). Downloads torch's dependencies, transformers and looprl's requirements (a few hundred
# MB, so not part of `make test`).
#  1. A bare venv standing for the GPU image: torch (the CPU build), transformers, tokenizers, safetensors and what
#     they pull in, nothing else. `bench/device_wheels.py` resolves looprl's wheels against it, and
#     `gpu_check.sh --smoke` installs them offline (`pip --no-index --no-deps --target`) and runs every stage.
#     Its Python is this machine's (3.11 here: the only CPU torch wheel at hand is cp311; on 3.12 the registry
#     serves torch's CUDA build, gigabytes).
#  2. The image's own set, `make device-wheels` (cp312): every wheel installs for CPython 3.12 on manylinux x86_64
#     (`pip install --dry-run --no-index --target`), and the compiled ones import in a Python 3.12 (installed
#     offline beside the stand-in for the image that `device_wheels.py` resolved against).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE_PYTHON:-python3}
work=build/device-check
torch_spec=${DEVICE_CHECK_TORCH:-torch==2.13.0}
transformers_spec=${DEVICE_CHECK_TRANSFORMERS:-transformers==5.17.0}
rm -rf "$work"
mkdir -p "$work"
"$base" -m venv "$work/image"
image=$work/image/bin/python
"$image" -m pip install --quiet --upgrade pip
"$image" -m pip install --quiet "$torch_spec" "$transformers_spec" tokenizers safetensors
# transformers -> huggingface-hub -> typer pulls in pydantic, which the GPU image lacks: take it out again
"$image" -m pip uninstall --quiet --yes pydantic pydantic-core
version=$("$image" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "== 1. bare venv (Python $version): $("$image" -m pip list --format=freeze 2>/dev/null | tr '\n' ' ')"
if "$image" -c "import pydantic" 2>/dev/null || "$image" -c "import fastapi" 2>/dev/null; then
  echo "the bare venv holds pydantic or fastapi: the bootstrap would not be tested" >&2
  exit 1
fi
"$base" bench/device_wheels.py --dest "$work/wheels" --image-python "$image" --python-version "$version"
LOOPRL_DEVICE_WHEELS=$work/wheels LOOPRL_DEVICE_SITE=$work/site PYTHON=$image \
  bash bench/gpu_check.sh --smoke --out "$work/report.json"
echo "== 2. the cp312 set for the GPU image"
"$base" bench/device_wheels.py --dest .device-wheels
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
"$base" -m pip install --quiet --dry-run --no-index --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" --target "$work/site312" .device-wheels/*.whl
py312=build/device-image-3.12/bin/python
"$py312" -m pip install --quiet --no-index --no-deps --no-compile --target "$work/site312" .device-wheels/*.whl
compiled=$(cd .device-wheels && ls ./*.whl | grep -v -- '-none-any.whl' | sed 's|^\./||; s/-.*//' | tr '\n' ' ')
PYTHONPATH=$work/site312 "$py312" -c "import importlib, os, sys
for name in sys.argv[2:]:
    module = importlib.import_module(name)
    assert module.__file__.startswith(os.path.abspath(sys.argv[1])), module.__file__
print('cp312 compiled wheels import:', *sys.argv[2:])" "$work/site312" $compiled
echo "device-check passed: report in $work/report.json"
