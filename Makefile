# Every target sets itself up from nothing: `make test` and `make demo` work
# in a fresh clone with only python3 (>= 3.10) and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := constraints.txt

.PHONY: test lint typecheck pytest demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-test: $(BIN)/python pyproject.toml $(CONSTRAINTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e ".[test]"
	touch $@

$(VENV)/.installed-demo: $(BIN)/python pyproject.toml $(CONSTRAINTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e ".[torchrl,plot]"
	touch $@

test: lint typecheck pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy --strict src

pytest: $(VENV)/.installed-test
	$(BIN)/pytest --cov=rlpulse --cov-branch --cov-report=term --cov-fail-under=90

demo: $(VENV)/.installed-demo
	$(BIN)/rlpulse demo

bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage runs
