# make demo: install into .venv if needed, then trace the toy model (trained once per machine).
# make test: install into .venv if needed, then run the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP := $(VENV)/.vlreg-installed

# torch and torchvision first, pinned: unpinned, pip takes a multi-GB build of another
# release; 2.14.1 / 0.29.1 are the pair pip takes on this stack (see README).
$(STAMP): pyproject.toml $(PLUGINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[test]' $(addprefix -e ,$(dir $(PLUGINS)))
	touch $(STAMP)

.PHONY: install test demo bench clean
install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

demo: $(STAMP)
	$(PY) -m vlreg demo

bench: $(STAMP)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/collect.py

clean:
	rm -rf $(VENV)
