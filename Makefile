# The two commands: `make bench` and `make test`. Both create .venv and install on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install bench test fast check fmt lab validate clean-results

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,ray,inspect]'
	$(PY) -m pip install -q --no-deps $$($(PY) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml','rb'))['tool']['orchbench']['no_deps']))")
	@touch $(STAMP)

install: $(STAMP)

## the main job: every strategy on the embedded local model, then the report and the notebooks
bench: install
	$(PY) -m kit run experiments/default.yaml --no-report
	$(PY) -m kit report results/default
	$(PY) -m kit notebooks results/default

## the whole suite (offline; starts the embedded model for the live tests) on two workers; prints the 15 slowest tests
test: install
	$(PY) -m kit tasks validate --all
	$(PY) -m pytest -q -n 2 --durations=15

## the fast subset (about a minute and a half): everything not marked slow
fast: install
	$(PY) -m pytest -q -m "not slow"

check: install
	$(PY) -m ruff check kit tests
	$(PY) -m ruff format --check kit tests

fmt: install
	$(PY) -m ruff check --fix kit tests
	$(PY) -m ruff format kit tests

## JupyterLab on notebooks/: --allow-root only when run as root, --no-browser on a headless machine
lab: install
	$(PY) -m kit lab
