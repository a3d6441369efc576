# Two commands do all the set-up on a fresh machine:
#   make figures   create .venv, install, execute the notebooks, regenerate figures/
#   make test      create .venv, install, run the tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install browser figures test lab

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $@

install: $(STAMP)

# Static figure export (kaleido) drives a Chromium; install Debian's when missing.
browser:
	@command -v chromium > /dev/null || command -v chromium-browser > /dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null && \
	    (apt-get update -qq && apt-get install -y -qq chromium > /dev/null) ; } || \
	  echo "WARNING: no chromium; figures are written as HTML only"

figures: install browser
	$(BIN)/python -m workbench.notebooks run

test: install browser
	$(BIN)/python -m pytest -q

lab: install
	$(BIN)/jupyter lab --allow-root notebooks
