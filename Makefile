# Two commands for a newcomer: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## run: create a demo database (printing its demo key once) and serve on 127.0.0.1:8080
run: $(STAMP)
	$(BIN)/petstore init --demo
	$(BIN)/petstore serve

## test: the whole suite
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## lint: ruff and mypy
lint: $(STAMP)
	$(BIN)/ruff check app tests bench wsgi.py
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

## bench: load benchmarks with wrk (installed from Debian's packages where missing)
bench: $(STAMP)
	$(BIN)/python -m bench.quotas
