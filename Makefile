# make demo: the dev stack's job on this machine (tiny model, CPU, real etcd + torchrun).  make test: every test.
PYTHON ?= python3
# Extra pip arguments for torch: empty here (the CPU build is on disk); a CI runner on the internet passes
# TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" to get the CPU build instead of the CUDA one.
TORCH_PIP_ARGS ?=
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo demo-drill test test-fast lint venv clean policy-venv preview pr-summary

venv: $(STAMP)

# torch is installed on its own first: the pinned CPU build, so that nothing later pulls a multi-GB CUDA build.
$(STAMP): requirements.txt requirements-trainer.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m local --stack dev

# The same job with two agents, one of them killed (agent and workers) after the first checkpoint.
demo-drill: $(STAMP)
	$(PY) -m local --stack dev --drill kill-agent --after-checkpoint

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m stack.docs --check
	$(PY) -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

policy-venv: policy/venv/.installed

policy/venv/.installed: policy/requirements.txt
	test -x policy/venv/bin/python || $(PYTHON) -m venv policy/venv
	policy/venv/bin/pip install --quiet -r policy/requirements.txt
	touch $@

# make preview STACK=p5-16   (needs the Pulumi CLI, a backend login and AWS credentials)
# Checked when the Makefile is read, before any prerequisite runs: without STACK, `--stack --policy-pack` would make
# Pulumi take "--policy-pack" for the stack's name.
STACKS := $(sort $(patsubst Pulumi.%.yaml,%,$(wildcard Pulumi.*.yaml)))
ifneq ($(filter preview,$(MAKECMDGOALS)),)
ifeq ($(strip $(STACK)),)
$(error make preview needs STACK, one of: $(STACKS) (for example: make preview STACK=p5-16))
endif
ifeq ($(filter $(STACK),$(STACKS)),)
$(error make preview STACK=$(STACK): there is no Pulumi.$(STACK).yaml; stacks: $(STACKS))
endif
endif

preview: $(STAMP) policy/venv/.installed
	pulumi preview --stack $(STACK) --policy-pack policy

pr-summary: $(STAMP)
	$(PY) -m tools.pr_summary

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
