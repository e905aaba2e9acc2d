# make demo: install into .venv if needed, then trace the toy model (shipped in vlreg/testing/shipped)
#            and draw its pictures into $(DEMO_OUT) (the pictures of docs/seeing-into-the-image.md).
# make test: install into .venv if needed, then run the tests (a worker per core) on the newest
#            transformers pyproject.toml's range allows (a fresh .venv takes it). The tests that
#            train a dictionary need sae-lens (pip install -e '.[train]') and the feature browser's
#            test Chromium (apt-get install chromium); without them they skip, saying so (.ci/run
#            installs both).
# make test-slow: the tests too slow for make test (training the toy from scratch: minutes).
# make test-floor: the floor's smoke set, on the oldest transformers vlreg supports (README: Compatibility).
# make test-remote (opt-in): a localhost NDIF server in .venv-remote, vlreg traces through it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP := $(VENV)/.vlreg-installed
DEMO_OUT ?= build/demo

# torch and torchvision first, pinned: unpinned, pip takes a multi-GB build of another
# release; 2.14.1 / 0.29.1 are the pair pip takes on this stack (see README).
$(STAMP): pyproject.toml $(PLUGINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[test]' $(addprefix -e ,$(dir $(PLUGINS)))
	touch $(STAMP)

.PHONY: install test test-slow test-floor demo bench catalog clean test-remote
install: $(STAMP)

# one worker per core, a test module or class to a worker (its module- or class-scoped checkpoints
# built once), in the order collected: the tests marked heavy first, so the workers finish
# together; one thread each: the workers share the cores, and the suite's figures do not depend
# on the split; the fifteen slowest named at the end (CI's time is the scarcest thing)
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -n auto --dist loadscope --no-loadscope-reorder --durations=15

test-slow: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -m slow

# The floor: .venv-floor borrows .venv's packages (vlreg and the plugins editable among them)
# and pins transformers at FLOOR over them, so it costs one wheel, not a second stack. Its
# smoke set is the families whose code reads a difference between the releases (the cache's
# keyword, the logit scale, the Mamba and short-convolution calls, the packed projectors)
# and a family of each kind of entry; make test runs everything on the newest release.
FLOOR ?= 5.23.0
FLOOR_VENV := .venv-floor
FLOOR_PY := $(FLOOR_VENV)/bin/python
FLOOR_STAMP := $(FLOOR_VENV)/.transformers-$(FLOOR)
FLOOR_SMOKE := tests/test_compat.py tests/test_per_call.py tests/test_declaration.py \
	plugins/qwen2_vl/tests/test_conformance.py plugins/lfm2_vl/tests plugins/nemotron/tests/test_nemotron.py \
	plugins/nemotron/tests/test_nemotron_h.py plugins/cohere/tests/test_conformance.py \
	plugins/llama4/tests/test_llama4.py plugins/chameleon/tests/test_conformance.py plugins/mllama/tests/test_conformance.py
$(FLOOR_STAMP): $(STAMP)
	rm -rf $(FLOOR_VENV)
	$(PYTHON) -m venv $(FLOOR_VENV)
	echo "import site; site.addsitedir('$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')')" \
		> "$$($(FLOOR_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz_borrow_venv.pth"
	$(FLOOR_PY) -m pip install -q --no-deps transformers==$(FLOOR)
	touch $(FLOOR_STAMP)

test-floor: $(FLOOR_STAMP)
	OMP_NUM_THREADS=1 $(FLOOR_PY) -m pytest -n auto --dist loadfile $(FLOOR_SMOKE)

demo: $(STAMP)
	$(PY) -m vlreg demo --out $(DEMO_OUT)

bench: $(STAMP)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/collect.py
	$(PY) benchmarks/attribution.py
	$(PY) benchmarks/gradients.py
	if $(PY) -c "import sae_lens" 2>/dev/null; then $(PY) benchmarks/training.py; \
	else echo "benchmarks/training.py not run: it trains with sae-lens (pip install -e '.[train]')"; fi

# The NDIF server's own venv, so .venv and make test never see it. ndif 0.1.2 says
# Python >= 3.12, but its sources run on 3.11 beside this stack (pip check is clean);
# vlreg and the plugins are in it too, since the model actor builds vlreg's model, moto's S3
# server, the object store results too large to return inline go through, and pgserver's
# PostgreSQL with ndif's postgres extra (asyncpg), the keys database that turns ndif's auth on.
# Ray is pinned at the release the harness was measured with (ndif leaves it open).
REMOTE_VENV := .venv-remote
REMOTE_PY := $(REMOTE_VENV)/bin/python
# The stamp is named for what the venv holds, so an older .venv-remote (no keys database) installs again.
REMOTE_STAMP := $(REMOTE_VENV)/.vlreg-installed-with-keys
$(REMOTE_STAMP): pyproject.toml $(PLUGINS)
	test -x $(REMOTE_PY) || $(PYTHON) -m venv $(REMOTE_VENV)
	$(REMOTE_PY) -m pip install -q --upgrade pip
	$(REMOTE_PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(REMOTE_PY) -m pip install -q -e '.[test]' $(addprefix -e ,$(dir $(PLUGINS)))
	$(REMOTE_PY) -m pip install -q --ignore-requires-python 'ndif[api,ray,postgres]==0.1.2' 'ray[default]==2.60.0' \
		'moto[server]==5.2.6' 'pgserver==0.1.4'
	$(REMOTE_PY) -m pip check
	touch $(REMOTE_STAMP)

test-remote: $(REMOTE_STAMP)
	command -v redis-server >/dev/null || (apt-get update -q && apt-get install -y -q redis-server)
	$(REMOTE_PY) tests/remote/server.py

# after changing a plugin's claims or adapters (its pyproject.toml's entry points)
catalog: $(STAMP)
	$(PY) tests/test_catalog.py

clean:
	rm -rf $(VENV) $(REMOTE_VENV) $(FLOOR_VENV)
