#!/usr/bin/env bash
# Build the native core for aarch64 and test it under qemu-user, on an x86-64 machine without ARM hardware.
#
#   scripts/test_aarch64.sh                   # all three stages below
#   scripts/test_aarch64.sh tests/test_native_ops.py -k softmax    # stage 3 with these pytest arguments
#   ONEWELL_AARCH64_PYTEST=0 scripts/test_aarch64.sh               # stages 1-2 only (about a minute)
#
# 1. every .c of the core compiles for aarch64 with the project's flags and -Werror (gcc; clang too when
#    `clang` is installed: --target=aarch64-linux-gnu with the cross sysroot);
# 2. the C kernel harness (tests/native_harness) checks every kernel path against vectors the numpy twins make
#    on the host: under `qemu-aarch64 -cpu max` (NEON, dotprod, i8mm: paths generic, neon, neon-dotprod) and
#    under `-cpu cortex-a53` (no dotprod: generic, neon; the dotprod rows fall back to the NEON kernels);
# 3. the native Python tests on an aarch64 CPython (Debian's python3.11 + numpy for arm64, unpacked into
#    $ONEWELL_ARM64_ROOT, never installed into the system) with the core cross-built for it, under qemu -cpu max.
#    sys.executable is a wrapper that runs qemu again, so tests that start a Python subprocess (the thread pool
#    stress runs) are emulated too, without binfmt_misc. Tests marked `model` are left out (hours under qemu).
#
# Needs: gcc-aarch64-linux-gnu, qemu-user (apt-get install gcc-aarch64-linux-gnu qemu-user), the host .venv
# (make setup; make native) for the numpy twins and the pure-Python test dependencies, and once, for stage 3, root to run
# `dpkg --add-architecture arm64 && apt-get update` (only package lists; packages are `apt-get download`ed).
# Time here (2 shared vCPUs): stages 1-2 about 1 minute, stage 3 about 10-20 minutes (emulation is ~20x slower):
# too long for .ci/run's budget, so it stays a script.
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
echo "aarch64: stage 2: the kernel harness passed with -cpu max and -cpu cortex-a53"

if [ "${ONEWELL_AARCH64_PYTEST:-1}" = 0 ]; then rm -rf "$WORK"; exit 0; fi

# ---- 3. the Python tests on an aarch64 CPython ----
ARM_PACKAGES=(libc6 libgcc-s1 gcc-12-base libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5 libzstd1
              libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1 libcrypt1 libdb5.3 libnsl2 libtirpc3
              libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
              libpython3.11-minimal libpython3.11-stdlib libpython3.11 libpython3.11-dev python3.11-minimal
              python3.11 libpython3-stdlib python3 python3-numpy libblas3 liblapack3 libgfortran5 libgomp1
              python3-regex python3-markupsafe)
if [ ! -x "$ARM_ROOT/usr/bin/python3.11" ]; then
    echo "aarch64: stage 3: unpacking Debian's arm64 python3.11 + numpy into $ARM_ROOT"
    dpkg --print-foreign-architectures | grep -qx arm64 || {
        echo "aarch64: run once as root: dpkg --add-architecture arm64 && apt-get update" >&2; exit 2; }
    mkdir -p "$WORK/debs" "$ARM_ROOT.tmp"
    (cd "$WORK/debs" && apt-get download "${ARM_PACKAGES[@]/%/:arm64}" python3-jinja2 media-types >/dev/null)
    for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$ARM_ROOT.tmp"; done
    # what the packages' maintainer scripts would do: the BLAS/LAPACK alternatives numpy loads
    ln -sf blas/libblas.so.3 "$ARM_ROOT.tmp/usr/lib/aarch64-linux-gnu/libblas.so.3"
    ln -sf lapack/liblapack.so.3 "$ARM_ROOT.tmp/usr/lib/aarch64-linux-gnu/liblapack.so.3"
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

# pure-Python test dependencies from the host venv (same Python minor version; packages with C parts come
# from Debian's arm64 packages above)
PURE=$WORK/purelib && mkdir -p "$PURE"
SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# (hypothesis is left out: recent versions carry a compiled part, and no native test uses it)
for pkg in pytest _pytest pluggy iniconfig packaging pygments py.py; do
    [ -e "$SITE/$pkg" ] && ln -s "$SITE/$pkg" "$PURE/$pkg"
done
for dist in "$SITE"/{pytest,pluggy,iniconfig,packaging,pygments}-*.dist-info; do
    [ -e "$dist" ] && ln -s "$dist" "$PURE/"
done

if [ "$#" -gt 0 ]; then TESTS=("$@"); else TESTS=("${DEFAULT_TESTS[@]}" -m "not model"); fi
export PYTHONPATH="$WORK/tree/src:$WORK/tree/tests:$PURE" PYTHONDONTWRITEBYTECODE=1
"$ARM_PY" -c "
import platform, onewell._native._core as c
assert platform.machine() == 'aarch64' and c.__file__.startswith('$WORK/'), (platform.machine(), c.__file__)
f = c.cpu_features(); print('aarch64: stage 3: testing', c.__file__, '| isa', f['isa'], '| paths', c.kernel_paths())" \
    </dev/null
status=0
"$ARM_PY" -m pytest -p no:cacheprovider -q "${TESTS[@]}" || status=$?
[ "$status" -eq 0 ] && rm -rf "$WORK" || echo "aarch64: scratch folder kept: $WORK" >&2
exit "$status"
