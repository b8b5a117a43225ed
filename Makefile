# Two commands for a newcomer: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LOCK := requirements.lock

.PHONY: run test lint docs screenshots contract-check changelog lock bench bench-large mutation clean

# Exactly the versions CI passed on (requirements.lock), then the service itself on top.
$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@$(BIN)/python -m pip check >/dev/null || { $(BIN)/python -m pip check; \
		echo "$(LOCK) does not satisfy pyproject.toml's dependencies: run make lock"; exit 1; }
	@touch $(STAMP)

## lock: refresh requirements.lock to the newest versions pyproject.toml allows (then make test)
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --upgrade --extra dev --strip-extras --allow-unsafe --no-emit-index-url \
		--no-emit-find-links --output-file $(LOCK) pyproject.toml
	@echo "$(LOCK) refreshed: review git diff $(LOCK), then run make test before committing."

## run: create a demo database (printing its demo key once) and serve on 127.0.0.1:8080
run: $(STAMP)
	$(BIN)/petstore init --demo
	$(BIN)/petstore serve

## test: the whole suite, in TEST_WORKERS processes (pytest-xdist): most of its time is spent
## waiting on the servers, databases and sleeps it starts, so two processes take about half
## the time of one even on two cores (TEST_WORKERS=0 runs it in this process, as pytest does);
## a module marked xdist_group runs whole in one process
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

SPECTRAL := tools/spectral/node_modules/.bin/spectral
OPENAPI := $(wildcard openapi/*.yaml openapi/released/*.yaml)

## lint: ruff, mypy, the import-linter contracts (pyproject.toml), the OpenAPI documents
## (openapi-spec-validator and Spectral), the release check (contract-check), and the
## manual's build (make docs)
lint: $(STAMP)
	$(BIN)/ruff check app tests bench docs/hooks tools wsgi.py
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/openapi-spec-validator $(OPENAPI)
	@$(MAKE) --no-print-directory contract-check
	@if command -v npm >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(SPECTRAL) && \
		$(SPECTRAL) lint --ruleset .spectral.yaml --fail-severity=hint $(OPENAPI); \
	elif [ -n "$$CI" ]; then \
		echo "Spectral needs node and npm, which CI must have."; exit 1; \
	else \
		echo "Skipping Spectral: node and npm are not installed (CI runs it)."; \
	fi
	@$(MAKE) --no-print-directory docs

## contract-check: every release in openapi/released/ against the live document of its major
## version (petstore-v2-2.2.0.yaml against petstore-v2.yaml): fails on any ERR, a change that
## breaks that release's clients (D29 in docs/house/decisions.md; docs/contract-review.md)
contract-check: $(STAMP)
	@status=0; for released in openapi/released/petstore-v*-*.yaml; do \
		live=openapi/$$(basename $$released | sed -E 's/^(petstore-v[0-9]+)-.*/\1/').yaml; \
		echo "petstore contract diff $$released $$live --fail-on ERR --level WARN"; \
		$(BIN)/petstore contract diff $$released $$live --fail-on ERR --level WARN || status=1; \
	done; \
	if [ $$status -ne 0 ]; then echo "A released version's clients break (ERR above): undo the \
	change, or make it in a new major version served beside this one (docs/contract-review.md)."; \
	fi; exit $$status

## changelog: write docs/changelog-v2.md, every change between v2's releases and the live v2
changelog: $(STAMP)
	$(BIN)/petstore contract changelog --title "Changelog of v2" \
		$$(ls openapi/released/petstore-v2-*.yaml | sort -V) openapi/petstore-v2.yaml \
		> docs/changelog-v2.md

## docs: build the manual (docs/, mkdocs.yml) into site/; --strict fails on a broken link,
## a missing page, an anchor that does not exist, or a page left out of the nav
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## screenshots: take the console's pictures of docs/console.md again, with the browser tests
## (headless Chromium: apt-get install chromium chromium-driver)
screenshots: $(STAMP)
	PETSTORE_CONSOLE_SCREENSHOTS=docs/images/console PETSTORE_TEST_REQUIRE_SERVICES=1 \
		$(BIN)/python -m pytest -q tests/e2e/test_console_browser.py

$(SPECTRAL): tools/spectral/package.json tools/spectral/package-lock.json
	cd tools/spectral && npm ci --no-audit --no-fund --loglevel=error
	@touch $(SPECTRAL)

## mutation: mutation testing (mutmut) of the code that guards people and messages, the
## modules of [tool.mutmut] in pyproject.toml: the score of each and every mutant left
## alive (tools/mutation_report.py; docs/house/checks.md says how long it takes). Not in
## make test: it runs the selected tests once for every mutant. mutmut keeps its work in
## mutants/, so a second run tests only what changed.
mutation: $(STAMP)
	$(BIN)/mutmut run
	$(BIN)/python tools/mutation_report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site mutants

## bench: load benchmarks with wrk (installed from Debian's packages where missing); those
## that also run over PostgreSQL (stores, v2, writes, feed, positions, guessing) use
## PETSTORE_BENCH_POSTGRES_URL (default the local one), and skip it, saying so, when it does
## not answer.
## AGAINST=REV also serves the service as it was at commit REV, for before/after ratios.
bench: $(STAMP)
	$(BIN)/python -m bench.service $(if $(AGAINST),--against $(AGAINST))
	$(BIN)/python -m bench.apps
	$(BIN)/python -m bench.quotas
	$(BIN)/python -m bench.stores
	$(BIN)/python -m bench.v2
	$(BIN)/python -m bench.writes $(if $(AGAINST),--against $(AGAINST))
	$(BIN)/python -m bench.feed
	$(BIN)/python -m bench.positions
	$(BIN)/python -m bench.webhooks
	$(BIN)/python -m bench.stock
	$(BIN)/python -m bench.pet_feed
	$(BIN)/python -m bench.guessing
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.contract
	$(BIN)/python -m bench.console
	$(BIN)/python -m bench.home

## bench-large: peak memory and download time of lists of 10,000 and 1,000,000 orders
bench-large: $(STAMP)
	$(BIN)/python -m bench.large
