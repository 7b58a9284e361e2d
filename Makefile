# Two commands do all set-up: `make run` and `make test`. Both bootstrap a pinned uv (with pip,
# into .tools) and install exactly uv.lock into .venv: the package (editable), every extra and
# the dev group. Edited pyproject.toml? `make lock` re-resolves; `make upgrade` takes the newest
# allowed versions into the lock; `make test-latest` tries them without touching the lock.
PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
UV_STAMP := $(TOOLS)/.uv-$(UV_VERSION)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LATEST := .venv-latest

# The interpreter is the machine's python3; uv never downloads one. A venv activated in the
# calling shell is not the project's: uv would warn about it.
export UV_PYTHON_DOWNLOADS := never
unexport VIRTUAL_ENV

.PHONY: install lock upgrade run test test-all test-latest lint typecheck bench chaos docs dist clean

$(UV_STAMP):
	rm -rf $(TOOLS)
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -qq --disable-pip-version-check uv==$(UV_VERSION)
	touch $@

# --locked: installs the lock as it is, and fails when pyproject.toml no longer matches it.
$(STAMP): pyproject.toml uv.lock $(UV_STAMP)
	@$(UV) sync --locked --all-extras --python $(PYTHON) || { \
	  echo "make: 'uv sync --locked' failed. If uv.lock does not match pyproject.toml," \
	       "run 'make lock' and commit uv.lock." >&2; exit 1; }
	touch $@

install: $(STAMP)

lock: $(UV_STAMP)
	$(UV) lock
	$(MAKE) install

upgrade: $(UV_STAMP)
	$(UV) lock --upgrade
	$(MAKE) install

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

# The newest versions pyproject.toml allows, in a venv of their own (uv.lock is left alone):
# an upstream release that breaks us shows here, on purpose, before it reaches the lock.
test-latest: $(UV_STAMP)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(LATEST)
	$(UV) pip install --quiet --upgrade --python $(LATEST)/bin/python -e '.[all]' --group dev
	$(UV) pip freeze --quiet --python $(LATEST)/bin/python --exclude-editable > $(LATEST)/versions.txt
	$(LATEST)/bin/python .ci/versions_vs_lock.py uv.lock $(LATEST)/versions.txt
	$(LATEST)/bin/ruff check .
	MYPY_CACHE_DIR=.mypy_cache/latest $(LATEST)/bin/mypy
	$(LATEST)/bin/pytest -m "not slow"

bench: install
	$(BIN)/python -m benchmarks

# SIGKILL and outbox chaos on SQLite, PostgreSQL and Redis; one table (jobs.testing.chaos).
chaos: install
	$(BIN)/python -m jobs.testing.chaos

# The documentation site (MkDocs + Material) into site/; strict: a broken link or reference fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The wheel and the sdist, into dist/.
dist: $(UV_STAMP)
	$(UV) build --quiet

clean:
	rm -rf $(VENV) $(LATEST) $(TOOLS) dist site .mypy_cache .pytest_cache .ruff_cache
