# tenantdb developer commands. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
TEST_PROCESSES ?= 2
# The report `make bench` compares its headline figures with (same profile only).
BENCH_BASELINE ?= bench/results/baseline.json

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Two distributions, both editable: tenantdb with its dev extra, and the devstack it is tested
# against (devstack/pyproject.toml) with its test extra, like any other test dependency.
INSTALL := -e './devstack[test]' -e '.[dev]'

$(STAMP): pyproject.toml devstack/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt $(INSTALL)
	touch $(STAMP)

.PHONY: install
install: $(STAMP) ## Create .venv; install tenantdb with its dev extra and the devstack

.PHONY: lock
lock: ## Re-resolve every dependency to its newest allowed version into constraints.txt
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet $(INSTALL)
	{ sed -n '/^#/p' constraints.txt; .lock-venv/bin/pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .lock-venv
	@echo "constraints.txt re-resolved: run make install test before committing it"

.PHONY: lint
lint: $(STAMP) ## ruff, ruff format --check, mypy --strict, import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports

.PHONY: fmt
fmt: $(STAMP) ## Format and auto-fix what ruff can
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: gen
gen: $(STAMP) ## Regenerate the CRDs, the kinds' Role rules, the metrics table (docs/metrics.md), the chart's values table and schema descriptions
	$(BIN)/python tools/gen_crds.py
	$(BIN)/python tools/gen_rbac.py
	$(BIN)/python tools/gen_metrics_doc.py
	$(BIN)/python tools/gen_chart_readme.py

.PHONY: kube
kube: ## Build the real kube-apiserver, etcd and helm into tools/kube/bin (first time: minutes)
	bash tools/kube/build.sh

.PHONY: unit
unit: $(STAMP) ## Unit tests only (fast, no services)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

.PHONY: services
services: ## Install (Debian, as root) and start Redis, MariaDB and promtool for the tests
	bash tools/services.sh

.PHONY: test
test: services kube lint ## Start the services, build the real kube-apiserver, lint, run every test
	$(BIN)/pytest -n $(TEST_PROCESSES) --dist loadgroup $(PYTEST_ARGS)

.PHONY: demo
demo: services $(STAMP) kube ## Start Redis and MariaDB, build the platform, run the whole stack with example orders (Ctrl-C stops it)
	$(BIN)/tenantdb demo

.PHONY: bench
bench: $(STAMP) kube ## Measure what an order costs on the platform (~40 min); writes docs/benchmarks.md
	$(BIN)/python -m bench --profile full --baseline $(BENCH_BASELINE) --doc docs/benchmarks.md

.PHONY: bench-fleet
bench-fleet: $(STAMP) kube ## Build a fleet of 10,000 Ready orders through tenantdb and measure it (~40 min); writes docs/benchmarks-fleet.md
	$(BIN)/python -m bench --profile fleet --doc docs/benchmarks-fleet.md

.PHONY: bench-mysql-fleet
bench-mysql-fleet: $(STAMP) kube ## Grow one group to 10,000 Ready MysqlDatabases through tenantdb and measure them (~30 min); writes docs/benchmarks-mysql-fleet.md
	$(BIN)/python -m bench --profile mysql-fleet --doc docs/benchmarks-mysql-fleet.md

.PHONY: bench-mysql-accounts
bench-mysql-accounts: $(STAMP) ## What a MariaDB server costs per new MysqlDatabase beside up to 10,000 accounts (~5 min; prints the table)
	$(BIN)/python -m bench.server_accounts

.PHONY: bench-quick
bench-quick: $(STAMP) kube ## The benchmark tables for small N, in about 6 minutes (prints them)
	$(BIN)/python -m bench --profile quick --out-dir $${TMPDIR:-/tmp}/tenantdb-bench

.PHONY: clean
clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
