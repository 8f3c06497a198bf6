# Two commands a newcomer needs: `make run` (the service on the embedded example cluster; PORT=9999 to move it)
# and `make test` (the whole suite). Both create .venv and install what they need. `make docs` serves the site.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 9876
# make test's pytest-xdist workers: two per core, since half the suite waits on servers and subprocesses.
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

.PHONY: install run test lint bench docs protos
install: $(STAMP)

run: $(STAMP)
	$(BIN)/koord scheduler --port $(PORT)

# The suite on every core (pytest-xdist; its ten slowest tests listed), then the few tests that measure CPU
# of real processes, alone.
# One area, quickly: $(BIN)/pytest -q tests/plugins (docs/development.md, Tests).
test: $(STAMP)
	$(BIN)/pytest -q -rs -n $(WORKERS) -m "not serial" --durations=10
	$(BIN)/pytest -q -rs -m serial

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/extender.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The generated modules of the vendored .proto files (hack/genproto.py; tests/test_genproto.py checks them).
protos: $(STAMP)
	$(BIN)/python hack/genproto.py
