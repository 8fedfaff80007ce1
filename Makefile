# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install system-packages test lint typecheck bench chaos demo schemas clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# PostgreSQL and Chromium for the tests, from Debian, when missing (deploy/system-packages.sh)
system-packages:
	deploy/system-packages.sh

test: $(STAMP) system-packages lint typecheck
	$(PY) -m shared.engine.schemas --check docs/schemas
	$(PY) -m pytest -q

schemas: $(STAMP)
	$(PY) -m shared.engine.schemas docs/schemas

bench: $(STAMP)
	$(PY) -m tests.bench.run --write docs/benchmarks.md

# Fault injection against real processes (tests/chaos/, docs/reliability.md); under 15 minutes.
chaos: $(STAMP)
	$(PY) -m tests.chaos.run --write docs/reliability.md

# The embedded stack end to end: push a change, review the diff, approve, see it published.
# `make demo DEMO_ARGS=--keep` leaves the stack running afterwards (Ctrl-C stops it).
demo: $(STAMP)
	$(VENV)/bin/rollwright demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
