# Two entry points: `make synth` (the reference platform, with a summary) and `make test`.
# Both set everything up on a fresh machine: a virtualenv with the pinned Python packages
# and the pinned CDK CLI from package-lock.json. No Docker engine and no AWS credentials.
# `make synth` installs only what synthesis needs (the library and its runtime, no torch);
# `make test` adds the extras and the test tools.

VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SAGEMAKER_SUPPRESS_V2_WARNING := 1
export AWS_EC2_METADATA_DISABLED := true
export NO_MKDOCS_2_WARNING := 1
# The extras and the test environments come through uv, which keeps one unpacked copy of each
# wheel in this cache and hard-links it into every environment: the CUDA builds of torch that
# PyPI has bring GBs of NVIDIA libraries each, the same ones to the main venv and the images'
# environments. The cache sits beside the environments, on their file system, for the links.
# pip (the base install) keeps no copy of what it downloads. uv reads no pip configuration: a
# mirror is UV_INDEX_URL to it.
# A machine that keeps one cache for every clone names it (`export UV_CACHE_DIR=...`, on the
# clones' file system) and a fresh clone downloads nothing twice.
export UV_CACHE_DIR ?= $(CURDIR)/.venvs/uv-cache
export PIP_NO_CACHE_DIR := 1
# Each phase's wall seconds, which `make test` prints at its end (scripts/phase_clock.py).
CLOCK := python3 scripts/phase_clock.py

.PHONY: setup setup-dev synth test test-fast lint docs dist api-baseline bench bench-compile clean test-envs image-matrix training-arguments run-local

setup: $(VENV)/.installed node_modules/.installed

setup-dev: setup $(VENV)/.installed-dev

$(VENV)/.installed: pyproject.toml runtime/pyproject.toml setup.py runtime/compiled_training_runtime/__init__.py
	$(CLOCK) venv python3 -m venv $(VENV)
	$(CLOCK) venv $(PY) -m pip install --quiet --upgrade pip
	$(CLOCK) venv $(PY) -m pip install --quiet -e ./runtime -e .
	touch $@

# The plotting and benchmark extras (torch, torch-xla) and the test tools.
$(VENV)/.installed-dev: $(VENV)/.installed Makefile
	$(CLOCK) extras $(PY) -m pip install --quiet "uv==0.13.*"
	$(CLOCK) extras $(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) \
		-e ./runtime -e ".[dev]"
	touch $@

node_modules/.installed: package.json package-lock.json
	$(CLOCK) npm npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: setup
	npx cdk synth --quiet
	$(PY) -m compiled_training.tools.summary cdk.out

# The training images' own Python and torch versions, and checkov, beside the main venv.
test-envs: setup-dev
	$(CLOCK) test-envs $(PY) tests/environments.py

# The site's strict build runs as a test (tests/docs/test_reference.py), which also reads it.
# lint (the CPU) and the side environments (mostly the disk) side by side, then the suite, the
# long tests first (tests/conftest.py); it ends with the 15 slowest tests and each phase's time.
test: setup-dev
	$(MAKE) --no-print-directory -j2 --output-sync=target lint test-envs
	$(CLOCK) pytest $(PY) -m pytest -n 2 --dist loadgroup -q --durations=15 \
		-p tests.suite_clock --suite-clock=.suite-clock; \
		status=$$?; $(CLOCK) --report; exit $$status

# A contributor's loop: the pure layers, the constructs and the docs' examples, without the
# runtime's torch and toolkit runs, the local runner, the images' environments, the wheels, the
# tests marked slow (CONTRIBUTING.md names them) and the currency test, which reads the package
# index; it builds the two tool environments its tests read. A few minutes on 2 cores. `make
# test` runs everything, as CI does.
test-fast: setup-dev
	$(PY) tests/environments.py checkov sagemaker-core
	$(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow" --durations=15 \
		--ignore=tests/catalog/test_currency.py \
		tests/advice tests/catalog tests/values \
		tests/definition tests/wiring tests/pipelines tests/schedules tests/nag tests/docs \
		tests/test_public_api.py tests/test_architecture.py tests/test_contract.py

# The documentation site (mkdocs.yml), built strictly: a broken link, a missing page or a
# public name without a docstring fails it. Into site/ (not committed).
docs: setup-dev
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir site

# The sdist and both wheels, as a release uploads them, checked by twine.
dist: setup-dev
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m build --outdir dist runtime
	$(VENV)/bin/twine check --strict dist/*

# A release writes the public surface it ships (api/), which `make lint` holds later changes
# to; CHANGELOG.md says what the release changed.
api-baseline: setup-dev
	$(PY) scripts/api_check.py --write

# ruff, mypy, the package's layers (import-linter's contracts in pyproject.toml), and the
# public surface against its baseline (scripts/api_check.py: a breaking change must be in
# CHANGELOG.md).
lint: setup-dev
	$(CLOCK) lint $(VENV)/bin/ruff check .
	$(CLOCK) lint $(VENV)/bin/mypy
	$(CLOCK) lint $(VENV)/bin/lint-imports --no-cache
	$(CLOCK) lint $(PY) scripts/api_check.py

# The DLC image matrix the library ships (catalog/image-uri-config), from the SageMaker SDK v3's
# image configuration, read in its own environment (scripts/image_matrix.py).
image-matrix: setup-dev
	$(PY) scripts/image_matrix.py

# The TrainingArguments fields the synth's HfArgumentParser check reads
# (catalog/training-arguments.json), from the newest PyTorch image's environment's transformers.
training-arguments: setup-dev test-envs
	$(PY) scripts/training_arguments.py

# The reference document-classification pipeline, run whole here (compiled-training run): its
# training step in the torch-xla 2.8 environment test-envs builds, on a tiny BERT.
run-local: setup-dev test-envs synth
	$(PY) scripts/run_local.py

bench: setup
	$(PY) benchmarks/synth_time.py

# The compile benchmark (torch installed): each compiler on a tiny BERT, and torch.compile's
# warm start, cold against warm from its compile cache, on two BERTs (benchmarks/RESULTS.md).
bench-compile: setup-dev
	$(VENV)/bin/compiled-training bench --steps 20 --out benchmarks/bench

clean:
	rm -rf cdk.out .pytest_cache .local-run site dist
