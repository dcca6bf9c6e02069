# make demo: the dev stack's job on this machine (tiny model, CPU, real etcd + torchrun).  make test: every test.
PYTHON ?= python3
# Extra pip arguments that find torch's CPU build: empty here (the wheel is on disk); a CI runner on the internet
# passes TORCH_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu" (PyPI has only the CUDA build).
# Either way the lock's hashes decide which file is accepted, from whichever index.
TORCH_PIP_ARGS ?=
# Regenerating the locks (`make lock`) needs pip-tools (pip-compile 7.7.0).
PIP_COMPILE ?= pip-compile
# Not passed to the recipes' environment: pip reads PIP_COMPILE there as its own --compile option (a boolean).
unexport PIP_COMPILE
PIP_COMPILE_ARGS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The type checker over the whole tree, as pyproject.toml's [tool.basedpyright] sets it, with this venv's packages.
TYPE_CHECK := $(VENV)/bin/basedpyright --pythonpath $(PY)

.PHONY: demo demo-drill test test-fast test-program lint venv clean policy-venv preview pr-summary lock

venv: $(STAMP)

# Everything from the lock, each file checked against its hash (pip's hash-checking mode: a requirement without a
# pinned version and a hash is refused, so nothing outside the lock is installed). The lock pins torch's CPU build,
# so nothing pulls a multi-GB CUDA build. The venv's own pip is used as it is: upgrading it would be an unpinned
# install.
$(STAMP): requirements-dev.lock
	PYTHON=$(PYTHON) scripts/system-packages.sh venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.lock $(TORCH_PIP_ARGS)
	touch $(STAMP)

# requirements*.txt say what the project needs; the locks pin every package with the hashes of its files. After a
# change to a .txt, `make lock` (a test fails while a lock and its .txt disagree). The test environment's lock comes
# first and constrains the others, so CI deploys with the very versions the tests ran.
# The trainer image's lock (docker/Dockerfile installs it with --require-hashes) is compiled from
# requirements-trainer.txt without torch, read from standard input, and requirements-trainer-gpu.txt: torch and the
# CUDA libraries it pins come with the base image (stack/versions.py TRAINER_BASE_IMAGE) and stay as they are. peft,
# accelerate and s3torchconnector require torch, so torch is the lock's one "unsafe" package: pip-compile leaves it
# out (--unsafe-package, without --allow-unsafe), and pip finds it already installed in the image; torch's own
# pure-Python dependencies stay pinned at the versions the tests ran with the same torch. The base image runs Python 3.11 on linux/amd64 (pytorch/pytorch
# docker.Makefile: PYTHON_VERSION ?= 3.11), the interpreter pip-compile resolves for here; compiled against PyPI, the
# lock holds the hashes of every file of each pinned version.
BASE_IMAGE_PACKAGES := ^torch([^A-Za-z0-9._-]|$$)
IMAGE_LOCK_ARGS := $(filter-out --allow-unsafe,$(PIP_COMPILE_ARGS)) --no-allow-unsafe --unsafe-package torch
lock:
	$(PIP_COMPILE) $(PIP_COMPILE_ARGS) --output-file requirements-dev.lock requirements-dev.txt requirements-torch-cpu.txt
	$(PIP_COMPILE) $(PIP_COMPILE_ARGS) --constraint requirements-dev.lock --output-file requirements.lock requirements.txt
	$(PIP_COMPILE) $(PIP_COMPILE_ARGS) --constraint requirements-dev.lock --output-file policy/requirements.lock policy/requirements.txt
	grep -v -E '$(BASE_IMAGE_PACKAGES)' requirements-trainer.txt | $(PIP_COMPILE) $(IMAGE_LOCK_ARGS) --constraint requirements-dev.lock --output-file requirements-trainer.lock - requirements-trainer-gpu.txt

demo: $(STAMP)
	$(PY) -m local --stack dev

# The same job with two agents, one of them killed (agent and workers) after the first checkpoint.
demo-drill: $(STAMP)
	$(PY) -m local --stack dev --drill kill-agent --after-checkpoint

# The tiers without slow tests on two pytest-xdist workers, a test file at a time (a module's fixtures made once).
PYTEST_ON_TWO = $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

# The system packages a few tests need (Prometheus, promtool, gpg, gpgv) are installed first when missing.
# The slow tests on two xdist workers, the others beside them in a second pytest (scripts/test-both-tiers.sh); the
# slowest of each are listed.
test: $(STAMP)
	scripts/system-packages.sh test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(TYPE_CHECK)
	$(PY) -m stack.docs --check
	scripts/test-both-tiers.sh $(PY)

# Tiers (markers in pyproject.toml): the unit tier, without multi-process or end-to-end runs (`slow`) and without runs
# of the Pulumi program under the mocks (`program`); then those program runs.
test-fast: $(STAMP)
	$(PYTEST_ON_TWO) -m "not slow and not program"

test-program: $(STAMP)
	$(PYTEST_ON_TWO) -m "program and not slow"

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(TYPE_CHECK)

policy-venv: policy/venv/.installed

policy/venv/.installed: policy/requirements.lock
	test -x policy/venv/bin/python || $(PYTHON) -m venv policy/venv
	policy/venv/bin/pip install --quiet --require-hashes -r policy/requirements.lock
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
