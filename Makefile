# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install system-packages test lint typecheck bench chaos demo schemas histories clean \
	commodore-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The real Commodore, which tests/engine/commodore compares rollwright's catalogs with: a venv
# of its own, because syn-commodore pins click, requests, gitpython and more exactly.
COMMODORE_VENV  ?= .commodore-venv
COMMODORE_STAMP := $(COMMODORE_VENV)/.installed-1.35.1
$(COMMODORE_STAMP):
	$(PYTHON) -m venv $(COMMODORE_VENV)
	$(COMMODORE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(COMMODORE_VENV)/bin/python -m pip install --quiet 'syn-commodore==1.35.1'
	touch $(COMMODORE_STAMP)

commodore-venv: $(COMMODORE_STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# PostgreSQL and Chromium for the tests, from Debian, when missing (deploy/system-packages.sh)
system-packages:
	deploy/system-packages.sh

test: $(STAMP) $(COMMODORE_STAMP) system-packages lint typecheck
	$(PY) -m shared.engine.schemas --check docs/schemas
	$(PY) -m pytest -q

schemas: $(STAMP)
	$(PY) -m shared.engine.schemas docs/schemas

# Record the workflow histories the suite replays (docs/workflow-versions.md): only when a
# release drops patches, never to make a failing replay pass.
HISTORY_SCENARIOS = \
	tests/workflows/test_replay.py \
	tests/workflows/test_promotion.py::test_continue_as_new_keeps_the_rollout_and_replays \
	tests/workflows/test_promotion.py::test_rollback_auto_reverts_the_promotion_and_the_node_verifies_again \
	tests/workflows/test_governance.py::test_the_revision_summary_continues_as_new_and_keeps_its_roots \
	tests/workflows/test_governed_clicks.py::test_unlock_counts_only_for_the_roots_approvers_with_write_access \
	tests/workflows/test_governed_clicks.py::test_promote_counts_only_for_the_approvers_of_the_node_promoted_to \
	tests/workflows/test_preview.py::test_continues_as_new_after_many_heads_and_keeps_its_state \
	tests/workflows/test_hotfix.py::test_a_hotfix_locks_its_root_until_its_pull_request_is_merged
histories: $(STAMP)
	rm -rf tests/histories/*/
	ROLLWRIGHT_RECORD_HISTORIES=1 $(PY) -m pytest -q $(HISTORY_SCENARIOS) \
		--deselect tests/workflows/test_replay.py::test_every_recorded_history_replays_on_the_registered_workflows

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
	rm -rf $(VENV) $(COMMODORE_VENV) out .pytest_cache .mypy_cache .ruff_cache
