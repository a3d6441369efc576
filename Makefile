# Two commands do all the set-up on a fresh machine:
#   make figures   create .venv, install, execute the notebooks, regenerate figures/
#   make test      create .venv, install, run the tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HARNESS := $(VENV)/.harness-installed
# The server settings of this environment (the first config path of `jupyter --paths`).
SERVER_CONFIG := $(VENV)/etc/jupyter/jupyter_server_config.json

.PHONY: install browser bytecode figures test test-fast lint lab

# Python writes the bytecode of what it imports, whatever the caller's environment says: where
# PYTHONDONTWRITEBYTECODE is set (as on our machines) every process the tests and notebooks start
# would compile torch's and the package's sources again. pip therefore skips compiling every file
# it installs (--no-compile, about 40 % of a fresh install): the modules a process imports are
# compiled once, at their first import, and read from then on.
unexport PYTHONDONTWRITEBYTECODE

# The pre-save hook keeps outputs out of the tracked notebooks when they are saved in the lab. The
# lab lists each notebook of notebooks/ once, as its .ipynb (jupytext keeps the hidden .py twin in
# step); hide_globs matches names in every folder, so it names the twins' pattern, NN_name.py, beside
# Jupyter's own defaults.
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile -r requirements.txt
	$(BIN)/pip install -q --no-compile --no-deps -r requirements-nodeps.txt
	$(BIN)/pip install -q --no-compile --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	mkdir -p $(dir $(SERVER_CONFIG))
	printf '{"ContentsManager": {"pre_save_hook": "workbench.notebooks.pre_save_hook", "hide_globs": %s}}\n' \
	  '["__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~", "[0-9][0-9]_*.py"]' > $(SERVER_CONFIG)
	touch $@

install: $(STAMP)

# lm-evaluation-harness and inspect-ai (pyproject's `harness` extra, docs/harness.md): the tests run
# the real packages; the pins of requirements.txt hold (torch's CPU wheel above all).
$(HARNESS): $(STAMP) pyproject.toml
	$(BIN)/pip install -q --no-compile -c requirements.txt -e '.[harness]'
	touch $@

# The package's bytecode, written once before the tests' workers and notebooks import it side by
# side. Python ignores a file whose source changed since, so it is never stale.
bytecode: install
	$(BIN)/python -m compileall -q workbench

# Static figure export (kaleido) drives a Chromium; install Debian's when missing.
browser:
	@command -v chromium > /dev/null || command -v chromium-browser > /dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null && \
	    (apt-get update -qq && apt-get install -y -qq chromium > /dev/null) ; } || \
	  echo "WARNING: no chromium; figures are written as HTML only"

figures: install browser bytecode
	$(BIN)/python -m workbench.notebooks run

# The tests run in one worker per core (pytest-xdist): most of the time goes to subprocesses of one
# thread each (trainings, notebooks, torchrun pairs), so the workers do not compete for threads.
# The 25 slowest are listed at the end, so that a CI log says where the suite's time went.
test: install browser bytecode $(HARNESS)
	$(BIN)/python -m pytest -q -n auto --dist worksteal --durations=25
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# the tests without the `slow` marker, for the edit-test loop
test-fast: install bytecode
	$(BIN)/python -m pytest -q -n auto --dist worksteal -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The lab serves the repository (figures/ and results/ included) and opens notebooks/.
lab: install
	$(BIN)/jupyter lab --allow-root --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks
