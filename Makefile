# Two commands for people: `make lab` and `make test`. Everything else supports them.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# nbval_kernels: each lesson's kernel listens on Unix sockets of its own, not TCP ports.
NBVAL := -p labkit.notebook.nbval_kernels --nbval --nbval-current-env --nbval-sanitize-with tests/notebooks/sanitize.cfg --nbval-cell-timeout=60
PORT ?= 8888
# The language of the lessons and check(): en or pt_BR. LABKIT_LANG wins; else
# Portuguese when LANG asks for it (LANG=pt_BR make lab opens notebooks/pt_BR/).
ifeq ($(strip $(LABKIT_LANG)),)
LABKIT_LANG := $(if $(filter pt%,$(LANG)),pt_BR,en)
endif
export LABKIT_LANG

.PHONY: help lab test quick lint venv venv-test notebooks notebook check-one release student-kit soak bench clean

# The shared, idempotent step: a venv, re-installed only when pyproject.toml changed.
$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "labkit needs Python 3.11 or newer: install it and run make again, or set PYTHON=/path/to/python3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[lab,web,services]'
	@touch $@

# The bench's peers too: tests/unit/test_bench_smoke.py runs every subject once.
# pip compiles every installed file on one core; compileall uses them all (half the time
# on 2 cores). The files must be compiled before the tests: the grader's sandbox reads
# the venv read-only, so what it imports uncompiled would be compiled on every start.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile -e '.[lab,web,services,check,dev,bench]'
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true  # a bad file in a package is pip's to ignore, too
	@touch $@ $(VENV)/.installed-lab $(VENV)/.installed-bench

$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed-test
	@touch $@

# What each target does (the default goal stays the venv's python, above).
help:
	@printf '%s\n' \
		'make lab                create .venv, install the lab, open JupyterLab (PORT=8890 to change the port)' \
		'make test               lint, then every test and every notebook (nbval); CI runs it via .ci/run' \
		'make quick              the fast loop: lint, then tests/unit and tests/contract (no notebooks, no services)' \
		'make lint               ruff and strict mypy' \
		'make notebook NB=name   rebuild notebooks/NB.ipynb from its .py by executing it' \
		'make notebooks          rebuild every lesson from its .py, then the Portuguese edition' \
		'LANG=pt_BR make lab     the lab in Portuguese (notebooks/pt_BR, exercises/pt_BR)' \
		'make check-one NB=name  re-run one lesson and compare every output (nbval)' \
		'make release            regenerate exercises/ from solutions/' \
		'make student-kit KIT=d  write the student kit (no solutions, no hidden checks) to d (default ../student-kit)' \
		'make soak               the long reliability runs (kill -9, chaos) on both backends' \
		'make bench              every benchmark subject; writes bench/results.json and bench/RESULTS.md' \
		'make venv               .venv with the lab installed (what make lab uses)' \
		'make venv-test          .venv with the test, service and bench tools too' \
		'make clean              remove .venv and the scratch folders' \
		'make help               this list'

venv: $(VENV)/.installed-lab

venv-test: $(VENV)/.installed-test

# Opens JupyterLab on the repository (lessons in notebooks/, exercises in exercises/).
# The banner shows the URL Jupyter really serves, read from its runtime file: Jupyter
# moves to the next free port when PORT is taken. On a headless server it prints that
# URL (with its token) instead of opening a browser: open it through an SSH tunnel.
# Ctrl-C stops the server and every kernel it started.
lab: venv
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] || [ "$$(uname)" = "Darwin" ]; then \
		$(BIN)/python -m labkit.notebook.server --notebook-dir=. --port=$(PORT) --open; \
	else \
		echo "No display found: starting JupyterLab headless; its URL follows once it serves."; \
		$(BIN)/python -m labkit.notebook.server --notebook-dir=. --port=$(PORT); \
	fi

# Every test, every notebook (nbval, strict), and the exercises' release check. The
# lessons run once, in a student kit built for the run (tests/kit: the kit's own
# `make venv` and `make check`, so they prove the kit and the lessons together).
# Four workers on a 2-core machine: much of the tests' time is spent waiting on worker
# processes, servers, brokers and the sandbox (CPU 32% idle with two workers, once; on
# 2026-12-04, one after the other on one machine, pytest took 580 s with three and 531 s
# with four). Whole files go to one worker each (--dist loadfile),
# longest first as tests/conftest.py orders them (--no-loadscope-reorder: xdist would
# otherwise reorder by number of tests, and a one-test file of two minutes ran last).
# The lab's own code is compiled first, as the venv's is: the tests start thousands of
# Python processes, the sandboxed ones read the checkout read-only, and where
# PYTHONDONTWRITEBYTECODE is set none would keep what it compiled (about a tenth of
# pytest's time, measured 2026-12-05).
# Lint runs beside the tests, not before them (strict mypy alone is ~20 s of CI's ten
# minutes); its output follows the tests', and the run fails when either fails.
test: venv-test
	@$(BIN)/python -m compileall -qq -j 0 labkit solutions/hidden tests bench
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	LABKIT_LANG=en $(BIN)/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder -p no:cacheprovider tests; tests=$$?; \
	wait $$lint; linted=$$?; cat $(VENV)/lint.log; \
	if [ $$linted -ne 0 ]; then echo "make lint failed (above)"; fi; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

# The house rules a machine can check: lint and strict types.
lint: venv-test
	$(BIN)/ruff check labkit tests bench
	$(BIN)/mypy

# The fast loop while editing: lint, then the unit and contract tests, stopping at the
# first failure. No notebooks; tests that need the services skip without them.
quick: lint
	$(BIN)/python -m pytest -q -x -n 2 -p no:cacheprovider tests/unit tests/contract

# Re-execute one lesson after editing its .py: make notebook NB=04_job_table
notebook: venv-test
	@test -n "$(NB)" || { echo "usage: make notebook NB=04_job_table"; exit 2; }
	LABKIT_LANG=en $(BIN)/python -m labkit.notebook.refresh refresh notebooks/$(NB).py

# Re-execute every lesson from its .py file, then build and execute the Portuguese
# edition from the lessons and their catalogs (notebooks/locale/pt_BR/).
notebooks: venv-test
	LABKIT_LANG=en $(BIN)/python -m labkit.notebook.refresh refresh notebooks/[0-9]*.py
	$(BIN)/python -m labkit.notebook.translate build

# Check one lesson the way CI does: make check-one NB=04_job_table
check-one: venv-test
	@test -n "$(NB)" || { echo "usage: make check-one NB=04_job_table"; exit 2; }
	$(BIN)/python -m pytest -p no:cacheprovider notebooks/$(NB).ipynb $(NBVAL)

release: venv-test
	$(BIN)/labkit release exercises

# The student kit (lessons, exercises, labkit; no solutions, no hidden checks), outside
# the repository: make student-kit KIT=../student-kit
KIT ?= ../student-kit
student-kit: venv-test
	$(BIN)/labkit release --bundle $(KIT)

# The long reliability runs: 10,000 jobs under kill -9, and the chaos runs (SIGKILL,
# SIGSTOP, terminated PostgreSQL backends, 0.5 s leases) on both backends, each printing
# its seed, a one-line replay and its lost / duplicated / stuck counts. `make test` runs
# short versions of the same tests.
soak: venv-test
	$(BIN)/python -m pytest -p no:cacheprovider -s tests/reliability --soak

# Every subject on both engines; writes bench/results.json (raw rows) and
# bench/RESULTS.md (with the load average, versions and this exact command).
bench: $(VENV)/.installed-bench
	$(BIN)/python bench/run.py --out bench/results.json --results bench/RESULTS.md

clean:
	rm -rf $(VENV) .labkit-scratch notebooks/.labkit-scratch .pytest_cache
