# celery-matrix: `make quickstart` sets everything up and runs the quickstart sweep on this
# machine; `make test` runs the whole test suite. Both are idempotent.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup services quickstart test unit lint dist docs clean-results

setup: $(VENV)/.installed services

# pip --quiet --quiet: errors only (a quickstart's terminal is for the sweep; the build backend's
# notes and a machine's pip configuration warnings stay off it).
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --quiet --upgrade pip
	@echo "installing cmx and its dependencies into $(VENV)/"
	@$(BIN)/python -m pip install --quiet --quiet -e '.[test]'
	@touch $@

# Redis, RabbitMQ and PostgreSQL on loopback, installed and started where missing (cmx services up).
services: $(VENV)/.installed
	@$(BIN)/cmx services up

quickstart: setup
	$(BIN)/cmx run experiments/quickstart.yaml
	$(BIN)/cmx report quickstart

# Installs (as root) or names what the multi-host and browser tests need: no test is skipped
# silently (CMX_ALLOW_SKIP=1 lets them be skipped knowingly). Every test runs, in parallel
# (pytest-xdist, TEST_WORKERS processes: most of a test's time is waiting on workers, brokers and
# fault windows, not CPU; the count is measured in docs/explanation/tests.md); a test marked
# `alone` runs while no other does (tests/alone.py). The 30 slowest are listed at the end.
# The longest tests start first, spread over the workers, by their measured seconds (tests/order.py,
# tests/durations.json: `python -m tests.order /tmp/cmx-suite/junit.xml` refreshes it).
# --basetemp: a short root for the tests' folders (/tmp/cmx-suite/popen-gwN/…, shorter than
# pytest's own /tmp/pytest-of-root/pytest-N/…), so the paths the CLI prints fit the lines the tests read.
TEST_WORKERS ?= 4
test: setup
	.ci/test-deps
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --basetemp=/tmp/cmx-suite -q -ra --durations=30 \
		--junitxml=/tmp/cmx-suite/junit.xml

# Only tests that need no service (no Redis, RabbitMQ, PostgreSQL, Ansible host or browser): those
# live in tests/integration and tests/faults, marked `integration`.
unit: $(VENV)/.installed
	$(BIN)/pytest -q -m "not integration and not slow" tests/unit

# ruff (lint and format: `.venv-lint/bin/ruff format .` fixes the format) and
# ansible-lint (production profile, .ansible-lint) in a venv of its own, so it never changes
# the ansible-core the project runs with.
lint: .venv-lint/.installed
	.venv-lint/bin/ruff check .
	.venv-lint/bin/ruff format --check .
	PATH="$(CURDIR)/.venv-lint/bin:$$PATH" ansible-lint roles/ engine/hosts/playbooks/

.venv-lint/.installed:
	$(PYTHON) -m venv .venv-lint
	.venv-lint/bin/python -m pip install --quiet 'ansible-lint==26.10.1' 'ruff==0.17.6'
	touch $@

# The wheel a user installs while cmx is not on the package index:
# `pipx install dist/celery_matrix-*.whl` (README, Install). `build` comes with the test extra.
dist: $(VENV)/.installed
	rm -rf dist
	$(BIN)/python -m build --quiet --wheel --outdir dist .
	@ls dist/*.whl

# The documentation site (mkdocs.yml; the reference pages are generated from the code by
# docs/hooks/gen_reference.py) into site/, strictly: a broken link or a missing page fails.
# NO_MKDOCS_2_WARNING: Material prints a banner about its successor on every build otherwise.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

clean-results:
	rm -rf results
