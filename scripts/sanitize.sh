#!/usr/bin/env bash
# Build the native core with AddressSanitizer + UndefinedBehaviorSanitizer and run the native tests on it.
#
#   scripts/sanitize.sh                 # the default test files (below)
#   scripts/sanitize.sh tests/test_threadpool.py -k wake    # any pytest arguments instead
#
# The build happens in a scratch copy of the tree (git's tracked and untracked-but-not-ignored files), so the
# normal in-place build under src/ is never touched. Python itself is not sanitized: libasan is preloaded,
# leak detection is off (CPython keeps objects alive at exit by design), and every report - ASan or UBSan -
# is written to a log file and fails the run. Exit status: 0 only if pytest passed AND there are no reports.
#
# Environment: PYTHON (default .venv/bin/python), ONEWELL_SANITIZE_DIR (scratch folder; default a new
# /tmp/onewell-sanitize.* that is removed afterwards when the run is clean), PYTEST_ARGS (extra arguments).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
CC_BIN=${CC:-gcc}
DEFAULT_TESTS=(tests/test_native_kernels.py tests/test_kernel_bf16_avx512.py tests/test_kernel_tile_f16.py tests/test_kernel_gemm_q8_0.py
               tests/test_kernel_gemm_f16_bf16.py tests/test_kernel_gemm_i8_rows.py
               tests/test_kernel_gemm_k_rows.py
               tests/test_r16_vector_blocks.py tests/test_repack_q8_0_r8.py tests/test_repack_q4_r8.py tests/test_repack_qk_r8.py
               tests/test_native_ops.py tests/test_threadpool.py tests/test_bindings_sizes.py
               tests/test_native_backend.py tests/test_kv_cache.py tests/test_fuzz_smoke.py tests/test_fuzz_regressions.py)

if [ -n "${ONEWELL_SANITIZE_DIR:-}" ]; then
    WORK=$ONEWELL_SANITIZE_DIR
    mkdir -p "$WORK"
    KEEP=1
else
    WORK=$(mktemp -d /tmp/onewell-sanitize.XXXXXX)
    KEEP=0
fi
REPORTS=$WORK/reports
rm -rf "$REPORTS" && mkdir -p "$REPORTS"

LIBASAN=$("$CC_BIN" -print-file-name=libasan.so)
if [ ! -e "$LIBASAN" ]; then
    echo "sanitize: $CC_BIN has no libasan.so (install gcc's sanitizer runtime, e.g. apt-get install libasan8)" >&2
    exit 2
fi
LIBASAN=$(readlink -f "$LIBASAN")

echo "sanitize: copying the tree to $WORK/tree"
rm -rf "$WORK/tree" && mkdir -p "$WORK/tree"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) \
    | (cd "$ROOT" && tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$WORK/tree"
find "$WORK/tree/src" -name '*.so' -delete

echo "sanitize: building the native core with -fsanitize=address,undefined"
(cd "$WORK/tree" && ONEWELL_SANITIZE=1 "$PY" setup.py -q build_ext --inplace --build-temp "$WORK/build" >"$WORK/build.log" 2>&1) || {
    tail -40 "$WORK/build.log" >&2
    echo "sanitize: the build failed (full log: $WORK/build.log)" >&2
    exit 2
}
CORE=$(ls "$WORK"/tree/src/onewell/_native/_core*.so)
# grep reads everything (no -q): an early exit would kill nm with SIGPIPE, which pipefail reports as a failure
if ! readelf -d "$CORE" | grep 'libasan' >/dev/null || ! nm -D "$CORE" | grep '__ubsan_handle' >/dev/null; then
    echo "sanitize: $CORE is not instrumented for ASan and UBSan; ONEWELL_SANITIZE was ignored?" >&2
    exit 2
fi

if [ "$#" -gt 0 ]; then TESTS=("$@"); else TESTS=("${DEFAULT_TESTS[@]}"); fi

# halt_on_error: the first report ends the process, so a report can never scroll by unnoticed.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:log_path=$REPORTS/asan:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan"
export PYTHONPATH="$WORK/tree/src:$WORK/tree${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

# Canary: an out-of-bounds memmove in this very setup must produce a report file, or reports would be lost.
CANARY=$WORK/canary && rm -rf "$CANARY" && mkdir -p "$CANARY"
ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:log_path=$CANARY/asan" LD_PRELOAD="$LIBASAN" "$PY" -c "
import ctypes
a, b = ctypes.create_string_buffer(1 << 20), ctypes.create_string_buffer(1 << 20)
ctypes.memmove(b, a, (1 << 20) + 64)" 2>/dev/null && true
if ! grep -qs 'heap-buffer-overflow' "$CANARY"/asan.*; then
    echo "sanitize: the canary overflow was not reported; ASan is not active in this setup" >&2
    exit 2
fi

# The sanitized copy must be what the tests import, not the editable install of $ROOT.
LD_PRELOAD="$LIBASAN" "$PY" -c "
import sys, onewell._native._core as c
assert c.__file__.startswith('$WORK/tree/'), c.__file__
print('sanitize: testing', c.__file__)"

status=0
(cd "$WORK/tree" && LD_PRELOAD="$LIBASAN" "$PY" -m pytest -p no:cacheprovider -q ${PYTEST_ARGS:-} "${TESTS[@]}") || status=$?

reports=$(find "$REPORTS" -type f | sort)
if [ -n "$reports" ]; then
    echo "sanitize: $(echo "$reports" | wc -l) sanitizer report(s):" >&2
    for r in $reports; do echo "== $r" >&2; head -60 "$r" >&2; done
    [ "$status" -ne 0 ] || status=1
else
    echo "sanitize: no ASan/UBSan reports"
fi
if [ "$status" -eq 0 ] && [ "$KEEP" -eq 0 ]; then
    rm -rf "$WORK"
else
    echo "sanitize: scratch folder kept: $WORK"
fi
exit "$status"
