# Every target sets itself up from nothing: `make test` and `make demo` work
# in a fresh clone with only python3 (>= 3.10) and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := constraints.txt
# What an install builds from: the metadata and the optional C extension.
BUILD_INPUTS := pyproject.toml setup.py src/rlpulse/_counters.c $(CONSTRAINTS)
# The Debian packages the tests drive for real (command name = package name):
# a terminal for `rlpulse top`, a Prometheus server scraping the exporter.
# Without recommends, so no node exporter comes with it; on a machine run by
# systemd, Debian starts the Prometheus service it installs (port 9090).
DEBIAN_TOOLS := tmux prometheus

.PHONY: test lint typecheck pytest demo bench diagram clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-test: $(BIN)/python $(BUILD_INPUTS) $(VENV)/.debian-tools
	$(PIP) install --quiet -c $(CONSTRAINTS) -e ".[test]"
	touch $@

# Installed with apt-get where missing (as root, or through sudo); without
# apt-get, the tests that need a tool say they are skipped.
$(VENV)/.debian-tools: $(BIN)/python
	@missing=""; for tool in $(DEBIAN_TOOLS); do \
		command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
		if ! command -v apt-get >/dev/null 2>&1; then \
			echo "note: no apt-get here; install$$missing to run every test"; \
		else \
			sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
			echo "installing$$missing with apt-get"; \
			$$sudo apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
		fi; \
	fi
	touch $@

$(VENV)/.installed-demo: $(BIN)/python $(BUILD_INPUTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e ".[torchrl,plot,top]"
	touch $@

test: lint typecheck pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks scripts setup.py conftest.py
	$(BIN)/ruff format --check src tests benchmarks scripts setup.py conftest.py

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy --strict src

pytest: $(VENV)/.installed-test
	$(BIN)/pytest --cov=rlpulse --cov-branch --cov-report=term --cov-fail-under=90

demo: $(VENV)/.installed-demo
	$(BIN)/rlpulse demo

bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks

# Redraws the component diagram of docs/architecture.md from the imports.
diagram: $(BIN)/python
	$(BIN)/python scripts/architecture_diagram.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage runs build
	rm -f src/rlpulse/_counters.*.so src/rlpulse/_counters.*.pyd
