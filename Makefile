# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test lint typecheck bench demo schemas clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: $(STAMP) lint typecheck
	$(PY) -m shared.schemas --check docs/schemas
	$(PY) -m pytest -q

schemas: $(STAMP)
	$(PY) -m shared.schemas docs/schemas

bench: $(STAMP)
	$(PY) -m tests.bench.run --write docs/benchmarks.md

demo: $(STAMP)
	@echo "make demo: the embedded stack arrives with the deploy issue; rendering the example fleets instead"
	$(VENV)/bin/rollwright validate --repo examples/atlas-fleet
	$(VENV)/bin/rollwright render --repo examples/atlas-fleet --out out/atlas-fleet
	$(VENV)/bin/rollwright validate --repo examples/dimensions-fleet
	$(VENV)/bin/rollwright render --repo examples/dimensions-fleet --out out/dimensions-fleet

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
