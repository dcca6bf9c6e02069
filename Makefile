# make demo: the dev stack's job on this machine (tiny model, CPU, real etcd + torchrun).  make test: every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint venv clean

venv: $(STAMP)

# torch is installed on its own first: the pinned CPU build, so that nothing later pulls a multi-GB CUDA build.
$(STAMP): requirements.txt requirements-trainer.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m workloads.local --stack dev

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m infra.config_docs --check
	$(PY) -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
