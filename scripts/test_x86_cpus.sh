#!/usr/bin/env bash
# The native core on x86 CPUs this machine is not, under qemu-x86_64 user mode (-cpu MODEL: QEMU's TCG runs AVX2,
# FMA and F16C, not AVX-512 or AVX-VNNI). The development machine changes between an AVX-512 Zen 5, an AVX2 Zen 3
# and an Intel Xeon with AMX; whichever it is, this checks the others' choices of the same build:
#
#   EPYC-Milan  AMD Zen 3: AVX2 only, AMD's per-CPU defaults (family 25)
#   EPYC-Rome   AMD Zen 2: AVX2 only (family 23)
#   Haswell     Intel AVX2 + FMA + F16C, no AVX-VNNI
#   Westmere    no AVX at all: the generic C path, what old x86 runs
#
# Per CPU:
#   1. the dispatch: the vendor, family and model the core reads, the kernel paths it offers and the one it picks
#      must be the CPU's (an AMD CPU taken for Intel, or AVX2 offered without it, fails here);
#   2. pytest of the native kernel and op tests under that CPU: an instruction the CPU lacks is SIGILL (the run
#      fails), and every result is checked against the numpy twins as on real hardware.
# This is correctness, not speed: emulated timings say nothing about a real CPU.
#
#   scripts/test_x86_cpus.sh                       # the four CPUs, the default test set (~5.5 minutes)
#   ONEWELL_X86_CPUS="EPYC-Milan" scripts/test_x86_cpus.sh tests/test_native_backend.py   # other tests, one CPU
#   ONEWELL_X86_TEST_CPUS="EPYC-Milan Westmere" scripts/test_x86_cpus.sh tests/test_native_kernels.py
#                                                  # every CPU's dispatch, the tests on two (CI: make x86-cpus-smoke,
#                                                  # about a minute)
#
# Needs qemu-user (qemu-x86_64; `make aarch64-tools` installs it) and the host .venv with the core built (make
# native). Times on an idle 2-vCPU machine: the default set ~100 s per AVX2 CPU, ~20 s on Westmere.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
QEMU=${QEMU_X86:-qemu-x86_64}
CPUS=${ONEWELL_X86_CPUS:-EPYC-Milan EPYC-Rome Haswell Westmere}
TEST_CPUS=${ONEWELL_X86_TEST_CPUS:-$CPUS}   # the CPUs that also run the tests (the others: the dispatch only)
# the smoke set: every kernel of every weight type against its twin, the ops, the rows GEMMs
SMOKE=(tests/test_native_kernels.py tests/test_native_ops.py tests/test_kernel_gemm_i8_rows.py)
TESTS=("$@")
[[ ${#TESTS[@]} -gt 0 ]] || TESTS=("${SMOKE[@]}")

say() { printf '[test_x86_cpus] %s\n' "$*" >&2; }
command -v "$QEMU" >/dev/null || { say "$QEMU not found: install qemu-user (make aarch64-tools)"; exit 1; }

# what each CPU model must look like to the core: vendor family paths default-path, then the per-CPU choices that
# differ between them (cpu_features.c): decode prefetch bytes, the AVX2 rows-GEMM mode, whether AVX2 repacks to the
# R8 layouts
expected() {
    case $1 in
    EPYC-Milan) echo "amd 25 generic,avx2 avx2 0 1 1" ;;      # Zen 3: no prefetch, R8 (perf-log 46)
    EPYC-Rome) echo "amd 23 generic,avx2 avx2 0 3 1" ;;       # family 0x17: no prefetch, Q8_0 GEMM in floats (41), R8 (42)
    Haswell) echo "intel 6 generic,avx2 avx2 8192 1 0" ;;
    Westmere) echo "intel 6 generic generic 8192 1 0" ;;
    *) echo "" ;;
    esac
}

cd "$ROOT"
status=0
for cpu in $CPUS; do
    want=$(expected "$cpu")
    # "vendor family paths default-path prefetch rows-GEMM R8|what else it chose", read by the core under that CPU
    seen=$("$QEMU" -cpu "$cpu" "$PY" - 2>/dev/null <<'PY'
from onewell._native import _core
i = _core.cpu_identity()
print(i["vendor"], i["family"], ",".join(_core.kernel_paths()), _core.kernel_default_path(), i["default_prefetch"],
      i["default_rows_gemm_avx2"], i["default_r8"], end="|")
print(f"F16 prefetch {i['default_f16_prefetch']} B, L1d {i['l1d_kib']} KiB")
PY
)
    got=${seen%%|*}
    if [[ -n $want && $got != "$want" ]]; then
        say "$cpu: the core sees '$got', expected '$want'"
        status=1
        continue
    fi
    say "$cpu: $got (${seen#*|})"
    [[ " $TEST_CPUS " == *" $cpu "* ]] || continue
    deselect=()
    # a CPU without SIMD paths has nothing to compare with the generic one
    [[ $got == *" generic generic "* ]] && deselect=(-k "not test_simd_paths_agree_with_generic")
    start=$SECONDS
    # TCG warns once per CPU feature it does not model (xsavec, ...): noise, not results
    if ! "$QEMU" -cpu "$cpu" "$PY" -m pytest -q -p no:cacheprovider "${deselect[@]}" "${TESTS[@]}" \
        2> >(grep -v "TCG doesn't support requested feature" >&2); then
        say "$cpu: tests FAILED"
        status=1
    fi
    say "$cpu: $((SECONDS - start)) s"
done
exit $status
