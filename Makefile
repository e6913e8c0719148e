# celery-matrix: `make quickstart` sets everything up and runs the quickstart sweep on this
# machine; `make test` runs the whole test suite. Both are idempotent.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup services quickstart test unit clean-results

setup: $(VENV)/.installed services

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

services:
	@.ci/services-up

quickstart: setup
	$(BIN)/cmx run experiments/quickstart.yaml
	$(BIN)/cmx report quickstart

# Installs (as root) or names what the multi-host and browser tests need: no test is skipped
# silently (CMX_ALLOW_SKIP=1 lets them be skipped knowingly).
test: setup
	.ci/test-deps
	$(BIN)/pytest -q -ra

unit: $(VENV)/.installed
	$(BIN)/pytest -q tests/unit

clean-results:
	rm -rf results
