# skxclust developer entry points. Every target installs what it needs into ./.venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.skxclust-installed
# -rs: the reason of every skipped test, in the short summary (quiet otherwise)
PYTEST_ARGS ?= -q -rs
BENCH_ARGS ?=

.PHONY: install demo test lint bench bench-quick docs clean

install: $(STAMP)

# torch==2.13.0 only when the environment has no torch: pip takes the build its index
# offers for this platform (on Linux from PyPI, the CUDA one; see the README's Quick start
# for a CPU-only or an existing torch). zennit without its torchvision requirement (which
# would pull another torch), its other dependencies come with [test].
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[test,bench]"
	$(PY) -m pip show zennit >/dev/null 2>&1 || $(PY) -m pip install --no-deps zennit
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py --output demo_output

# The README's test command (CI: .ci/run): the lint gate first, then pytest.
test: $(STAMP) lint
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest $(PYTEST_ARGS)

# ruff on all the code; mypy on the package (its settings: pyproject.toml's [tool.mypy]).
# tests/test_project_habits.py keeps both in `make test`, before pytest.
lint: $(STAMP)
	$(PY) -m ruff check skxclust tests benchmarks examples
	$(PY) -m mypy skxclust

# Every benchmarks/bench_*.py: results/*.json, then the README results section (see
# benchmarks/runner.py). bench-quick: ~2 minutes, into benchmarks/results/quick/, README untouched.
# Extra options: make bench BENCH_ARGS="--only explainable,quality".
bench: $(STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(PY) -m benchmarks --quick $(BENCH_ARGS)

# Documentation, warnings as errors. SKXCLUST_EXAMPLES_QUICK=1 runs the gallery on small data.
DOC_STAMP := $(VENV)/.skxclust-doc-installed
$(DOC_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -e ".[doc]"
	touch $(DOC_STAMP)

docs: $(DOC_STAMP)
	$(VENV)/bin/sphinx-build -W -b html doc doc/_build/html

clean:
	rm -rf $(VENV) demo_output build *.egg-info
