#!/usr/bin/env bash
# Build the native core for aarch64 and test it under qemu-user, on an x86-64 machine without ARM hardware.
#
#   scripts/test_aarch64.sh                   # all three stages below (stage 3: the native test files)
#   scripts/test_aarch64.sh tests/test_native_ops.py -k softmax    # stage 3 with these pytest arguments
#   ONEWELL_AARCH64_PYTEST=0 scripts/test_aarch64.sh               # stages 1-2 only (CI: make aarch64-smoke)
#   ONEWELL_AARCH64_PER_FILE=1 ONEWELL_AARCH64_MARKS="not model and not ray" scripts/test_aarch64.sh tests/test_*.py
#                                             # stage 3, one pytest per file, a table of outcomes and minutes
#                                             # (ONEWELL_AARCH64_PYTEST_ARGS="-x --durations=10": more arguments for
#                                             # every file; ONEWELL_AARCH64_LOG_DIR=dir keeps each file's log)
#
# 1. every .c of the core compiles for aarch64 with the project's flags and -Werror (gcc; clang too when
#    `clang` is installed: --target=aarch64-linux-gnu with the cross sysroot);
# 2. the C kernel harness (tests/native_harness) checks every kernel path against vectors the numpy twins make
#    on the host: under `qemu-aarch64 -cpu max` (NEON, dotprod, i8mm: paths generic, neon, neon-dotprod) and
#    under `-cpu cortex-a53` (no dotprod: generic, neon; the dotprod rows fall back to the NEON kernels); with
#    clang installed, a clang build of the harness under `-cpu max` too (clang writes sdot differently);
# 3. Python tests on an aarch64 CPython under qemu -cpu max, with the core cross-built for it: Debian's arm64
#    python3.11 and its C libraries unpacked (never installed) into $ONEWELL_ARM64_ROOT, the project's dependencies
#    and test extra as PyPI's aarch64 wheels at the host venv's versions (less ray and playwright: the browser test
#    needs a native driver and stays x86-only). sys.executable is a wrapper that runs qemu again, so tests that
#    start a Python subprocess are emulated too, without binfmt_misc. -m "not model" by default (the model
#    tests take hours under emulation). ONEWELL_TEST_TIME_SCALE (default 20 here: emulation is 10-20x slower for
#    Python, 100-150x for the kernels' SIMD and numpy's BLAS) stretches the tests' wall-time budgets
#    (fuzz/time_scale.py: scaled(), used by the tests and fuzz/serve_load.py).
#
# Needs: gcc-aarch64-linux-gnu, qemu-user, the host .venv (make setup; make native) for the numpy twins and pip,
# and once, for stage 3, root to run `dpkg --add-architecture arm64 && apt-get update` (`make aarch64-tools` does
# all that; packages are only `apt-get download`ed). Time on an idle 2-vCPU machine: stages 1-2 under a minute;
# stage 3 with the native test files about a minute and a half, plus about a minute to build the root once;
# emulation is ~10-20x slower than native, a file of the full suite takes 0.5-7 minutes on a loaded machine.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
CROSS_ROOT=${AARCH64_CROSS_ROOT:-/usr/aarch64-linux-gnu}
ARM_ROOT=${ONEWELL_ARM64_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/onewell/arm64-root}
WORK=$(mktemp -d /tmp/onewell-aarch64.XXXXXX)
NATIVE=src/onewell/_native
CFLAGS=(-O3 -std=c11 -fvisibility=hidden -fno-math-errno -Wall -Wno-unused-function -Werror -fPIC)
DEFAULT_TESTS=(tests/test_native_kernels.py tests/test_native_ops.py tests/test_type_traits.py
               tests/test_repack.py tests/test_repack_q4_1.py tests/test_threadpool.py)

for tool in "$CC" "$QEMU"; do
    command -v "$tool" >/dev/null || { echo "aarch64: $tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2; exit 2; }
done
trap 'echo "aarch64: scratch folder kept: $WORK" >&2' ERR

# The tree as git sees it (tracked + untracked-not-ignored), so nothing of the host build leaks in.
mkdir -p "$WORK/tree"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) \
    | (cd "$ROOT" && tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$WORK/tree"
find "$WORK/tree/src" -name '*.so' -delete
cd "$WORK/tree"

# ---- 1. compile every source for aarch64, no warnings allowed ----
PYINC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")   # only for the syntax of Python.h
compile_all() {   # compiler and flags...; every .c to an object in $WORK/obj-<name>
    local name=$1; shift
    mkdir -p "$WORK/obj-$name"
    for src in $(find "$NATIVE" -name '*.c' | sort); do
        nice -n 19 "$@" "${CFLAGS[@]}" -I "$NATIVE" -I "$PYINC" -c "$src" -o "$WORK/obj-$name/$(basename "$src" .c).o"
    done
    echo "aarch64: stage 1: $(find "$NATIVE" -name '*.c' | wc -l) sources compile without warnings ($name)"
}
compile_all gcc "$CC"
if command -v clang >/dev/null; then
    compile_all clang clang --target=aarch64-linux-gnu --sysroot="$CROSS_ROOT" -isystem "$CROSS_ROOT/include"
else
    echo "aarch64: stage 1: clang not installed, the clang build was not checked"
fi

# ---- 2. the C kernel harness under qemu, with and without dotprod ----
nice -n 19 "$CC" -O2 -std=c11 -Wall -Wno-unused-function -Werror -fno-math-errno -I "$NATIVE" \
    -o "$WORK/kernel_harness" tests/native_harness/kernel_harness.c "$NATIVE"/kernels/*.c "$NATIVE"/cpu_features.c -lm
# the twins run on the host: the host build of $ROOT (make native) imports; the copy here has no extension
nice -n 19 "$PY" tests/native_harness/make_vectors.py "$WORK/vectors.bin"
"$QEMU" -L "$CROSS_ROOT" -cpu max "$WORK/kernel_harness" "$WORK/vectors.bin" --expect-paths generic,neon,neon-dotprod
"$QEMU" -L "$CROSS_ROOT" -cpu cortex-a53 "$WORK/kernel_harness" "$WORK/vectors.bin" --expect-paths generic,neon
if command -v clang >/dev/null; then   # clang compiles; the cross gcc links (it knows the cross libc's layout)
    mkdir -p "$WORK/harness-clang"
    for src in tests/native_harness/kernel_harness.c "$NATIVE"/kernels/*.c "$NATIVE"/cpu_features.c; do
        nice -n 19 clang --target=aarch64-linux-gnu --sysroot="$CROSS_ROOT" -isystem "$CROSS_ROOT/include" -O2 \
            -std=c11 -Wall -Wno-unused-function -Werror -fno-math-errno -I "$NATIVE" -c "$src" \
            -o "$WORK/harness-clang/$(basename "$src" .c).o"
    done
    "$CC" -o "$WORK/kernel_harness_clang" "$WORK"/harness-clang/*.o -lm
    "$QEMU" -L "$CROSS_ROOT" -cpu max "$WORK/kernel_harness_clang" "$WORK/vectors.bin" --expect-paths generic,neon,neon-dotprod \
        | tail -n 1
    echo "aarch64: stage 2: the clang-built kernel harness passed with -cpu max"
fi
echo "aarch64: stage 2: the kernel harness passed with -cpu max and -cpu cortex-a53"

if [ "${ONEWELL_AARCH64_PYTEST:-1}" = 0 ]; then rm -rf "$WORK"; exit 0; fi

# ---- 3. the Python tests on an aarch64 CPython ----
# The interpreter and the C libraries it needs: Debian's arm64 packages, unpacked (never installed) into $ARM_ROOT.
ARM_PACKAGES=(libc6 libgcc-s1 libstdc++6 gcc-12-base libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5 libzstd1
              libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1 libcrypt1 libdb5.3 libnsl2 libtirpc3
              libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
              libpython3.11-minimal libpython3.11-stdlib libpython3.11 libpython3.11-dev python3.11-minimal
              python3.11 libpython3-stdlib python3)
# The Python packages: the project's dependencies and its test extra (less Ray, whose tests are deselected by
# default, and Playwright, whose driver is a native program: the browser test stays x86-only), as PyPI's
# manylinux aarch64 wheels at the host venv's versions, installed by the host's pip into the root's dist-packages
# (a real site folder, so `python -I` sees them too).
ARM_REQS=$("$PY" -c "
import re, tomllib
p = tomllib.load(open('pyproject.toml', 'rb'))['project']
reqs = p['dependencies'] + p['optional-dependencies']['test'] + ['pip']
names = [re.split(r'[<>=!~;\[ ]', r)[0] for r in reqs]
print(' '.join(sorted({n for n in names if n not in ('ray', 'playwright')})))")
ARM_STAMP="${ARM_PACKAGES[*]} | $ARM_REQS | $("$PY" -m pip freeze --exclude-editable 2>/dev/null | md5sum | cut -c1-12)"
if [ "$(cat "$ARM_ROOT/.onewell-stamp" 2>/dev/null)" != "$ARM_STAMP" ]; then
    echo "aarch64: stage 3: building $ARM_ROOT (Debian's arm64 python3.11, PyPI's aarch64 wheels)"
    dpkg --print-foreign-architectures | grep -qx arm64 || {
        echo "aarch64: run once as root: dpkg --add-architecture arm64 && apt-get update" >&2; exit 2; }
    rm -rf "$ARM_ROOT.tmp" && mkdir -p "$WORK/debs" "$ARM_ROOT.tmp"
    (cd "$WORK/debs" && apt-get download "${ARM_PACKAGES[@]/%/:arm64}" media-types >/dev/null)
    for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$ARM_ROOT.tmp"; done
    "$PY" -m pip freeze --exclude-editable >"$WORK/constraints.txt"
    # pip takes the platform tags literally: every manylinux tag up to the root's glibc (bookworm: 2.36)
    PLATFORMS=(--platform manylinux2014_aarch64) && for minor in $(seq 17 36); do
        PLATFORMS+=(--platform "manylinux_2_${minor}_aarch64"); done
    # shellcheck disable=SC2086  # ARM_REQS is a list of names
    nice -n 19 "$PY" -m pip install -q --disable-pip-version-check --no-compile \
        --target "$ARM_ROOT.tmp/usr/lib/python3/dist-packages" --only-binary=:all: --implementation cp \
        --python-version 3.11 --abi cp311 --abi abi3 --abi none "${PLATFORMS[@]}" -c "$WORK/constraints.txt" $ARM_REQS
    echo "$ARM_STAMP" >"$ARM_ROOT.tmp/.onewell-stamp"
    rm -rf "$ARM_ROOT" && mv "$ARM_ROOT.tmp" "$ARM_ROOT"
fi
# An interpreter wrapper whose path is also the guest's argv[0], so sys.executable is the wrapper and tests that
# start a Python subprocess get an emulated one too (no binfmt_misc needed).
mkdir -p "$WORK/bin"
ARM_PY=$WORK/bin/python3.11
printf '#!/bin/sh\nexec %s -L %s -cpu max -0 %s %s "$@"\n' "$(command -v "$QEMU")" "$ARM_ROOT" "$ARM_PY" \
    "$ARM_ROOT/usr/bin/python3.11" >"$ARM_PY"
chmod +x "$ARM_PY"

# the extension, cross-built with setup.py's flags against the arm64 Python headers (no libpython link)
EXT_SUFFIX=$("$ARM_PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
nice -n 19 "$CC" "${CFLAGS[@]}" -shared -pthread -I "$NATIVE" -I "$ARM_ROOT/usr/include/python3.11" \
    -idirafter "$ARM_ROOT/usr/include" $(find "$NATIVE" -name '*.c' | sort) -o "$NATIVE/_core$EXT_SUFFIX" -lm

export PYTHONPATH="$WORK/tree/src:$WORK/tree/tests" PYTHONDONTWRITEBYTECODE=1
export ONEWELL_TEST_TIME_SCALE=${ONEWELL_TEST_TIME_SCALE:-20}   # wall-time budgets of the tests, see conftest.py
"$ARM_PY" -c "
import platform, onewell._native._core as c
assert platform.machine() == 'aarch64' and c.__file__.startswith('$WORK/'), (platform.machine(), c.__file__)
f = c.cpu_features(); print('aarch64: stage 3: testing', c.__file__, '| isa', f['isa'], '| paths', c.kernel_paths())" \
    </dev/null

status=0
if [ "${ONEWELL_AARCH64_PER_FILE:-0}" = 1 ]; then
    # one pytest per test file (the arguments, or every tests/test_*.py), a table of outcomes and minutes at the end
    [ "$#" -gt 0 ] && FILES=("$@") || FILES=(tests/test_*.py)
    # ONEWELL_AARCH64_PYTEST_ARGS: more pytest arguments for every file (split on spaces, e.g. "-x --durations=5");
    # ONEWELL_AARCH64_LOG_DIR: keep each file's pytest log there (else in the scratch folder, removed on success)
    read -r -a EXTRA <<<"${ONEWELL_AARCH64_PYTEST_ARGS:-}"
    LOGS=${ONEWELL_AARCH64_LOG_DIR:-$WORK} && mkdir -p "$LOGS"
    TABLE=$LOGS/per-file.txt && : >"$TABLE"
    for f in "${FILES[@]}"; do
        t0=$(date +%s) rc=0
        log=$LOGS/log-$(basename "$f" .py).txt
        "$ARM_PY" -m pytest -p no:cacheprovider -q ${ONEWELL_AARCH64_MARKS:+-m "$ONEWELL_AARCH64_MARKS"} \
            ${EXTRA[@]+"${EXTRA[@]}"} "$f" >"$log" 2>&1 </dev/null || rc=$?
        [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1   # 5: every test of the file deselected by the marks
        printf '%-42s %5s min  rc=%s  %s\n' "$f" "$(awk "BEGIN {printf \"%.1f\", ($(date +%s) - $t0) / 60}")" "$rc" \
            "$(tail -n 1 "$log")" | tee -a "$TABLE"
    done
    echo "aarch64: stage 3 per file:" && cat "$TABLE"
else
    if [ "$#" -gt 0 ]; then TESTS=("$@"); else TESTS=("${DEFAULT_TESTS[@]}" -m "not model"); fi
    "$ARM_PY" -m pytest -p no:cacheprovider -q "${TESTS[@]}" || status=$?
fi
[ "$status" -eq 0 ] && rm -rf "$WORK" || echo "aarch64: scratch folder kept: $WORK" >&2
exit "$status"
