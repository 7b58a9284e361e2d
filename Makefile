# Two commands do all set-up: `make run` and `make test`. Both create .venv and install into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-all lint typecheck bench chaos docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python -m examples.orders

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -m "not slow"

test-all: lint typecheck
	$(BIN)/pytest

bench: install
	$(BIN)/python -m benchmarks

# SIGKILL and outbox chaos on SQLite, PostgreSQL and Redis; one table (jobs.testing.chaos).
chaos: install
	$(BIN)/python -m jobs.testing.chaos

# The documentation site (MkDocs + Material) into site/; strict: a broken link or reference fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
