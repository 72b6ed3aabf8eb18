# Two commands matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

# The suite prints its 25 slowest tests, so every CI log says where its minutes go.
PYTEST_ARGS ?= --durations=25

.PHONY: run test test-js lint typecheck format-check bench bench-smoke install migrate clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/activate requirements.txt requirements-dev.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

# Secrets the environment does not set come from var/local-keys.env, generated once
# (controlplane/keys.py): outside DEBUG nothing starts on development keys.
LOCAL_KEYS = eval "$$($(PY) -m controlplane.keys)"

migrate: install
	$(LOCAL_KEYS) && $(PY) manage.py migrate --no-input

# daphne + a real Celery worker and beat + the demo agent; one Ctrl-C stops them all.
run: migrate
	$(LOCAL_KEYS) && $(PY) manage.py seed_demo && exec $(PY) manage.py runstack $(RUN_ARGS)

# The fast checks first, each failing the run on its own: the architecture contracts (.importlinter:
# one-way app dependencies, no cycles), lint, types (pyproject.toml holds ruff's and mypy's config),
# then the TypeScript client's own tests, then the suite. `make lint`, `make typecheck`,
# `make format-check` and `make test-js` run one check alone.
test: install
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MAKE) test-js
	$(BIN)/pytest $(PYTEST_ARGS)

# clients/typescript: its pinned lockfile, a tsc build, then node's test runner (prints its summary).
test-js:
	cd clients/typescript && npm ci --no-audit --no-fund && npm test
	cd clients/typescript/hosts/mastra && npm ci --no-audit --no-fund --engine-strict=false && npm test
	cd clients/typescript/hosts/openai-agents && npm ci --no-audit --no-fund && npm test
	cd clients/typescript/hosts/ai-sdk && npm ci --no-audit --no-fund && npm test

lint: install
	$(BIN)/ruff check .

format-check: install
	$(BIN)/ruff format --check .

# Strict on approvals/services, approvals/policy, audit and the client; checked elsewhere.
typecheck: install
	$(BIN)/mypy

# Benchmarks need PostgreSQL and Redis (as .ci/run starts them); each figure is a ratio
# against a baseline measured in the same run. Results: var/bench.json.
bench: install
	$(PY) -m tests.perf.run $(BENCH_ARGS)

# Tiny sizes, no thresholds: CI runs it so the benchmarks cannot rot.
bench-smoke: install
	$(PY) -m tests.perf.run --smoke

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis .mypy_cache .ruff_cache
