#!/usr/bin/env bash
# Everything a CPU the project was never measured on needs, in one run, into one folder:
#   1. the llama.cpp 11434 builds this CPU compares against (llamacpp_build.sh: native; avx2 and avxvnni where
#      they differ from native), all before any timing, so nothing compiles while something is measured;
#   2. prototypes/x86_pipe_pairs.py: which prefill-tile instructions share execution pipes here (pipe-pairs.txt;
#      3 s; on Zen 4 it showed why the int8 tiles and the float GEMM share one floor, perf-log 20 and 27);
#      cpu_decisions.py: every per-CPU kernel choice against its alternatives (cpu-decisions.md);
#   3. vs_llamacpp.sh on each ISA path (native/, avx2/, avxvnni/): pp128 and tg32, 1 and 2 threads;
#   4. kv_depth.sh with the f16 cache, 2 threads, on each path (kv-native/, kv-avx2/): tg32 at depth 0 and 4,096;
#   5. vs_summary.py over all of it (summary.md): median pair ratios against issue 14's targets.
# About 20 minutes on 2 cores (perf-log 27), plus ~4 minutes per llama.cpp build it has to make. Run it on an
# otherwise idle machine, then read summary.md, cpu-decisions.md and pipe-pairs.txt: a variant above 1 at both
# thread counts is a case for a row in cpu_features.c (docs/benchmarking.md).
#
# usage: benchmarks/new_cpu.sh
# environment: OUT_DIR (default bench-results/new-cpu-<UTC date-time>); REPS (default 5); PYTHON (default the
#   project's .venv if there is one); SKIP (space-separated steps to leave out: pipes, decisions, vs, kv)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
OUT_DIR=${OUT_DIR:-bench-results/new-cpu-$(date -u +%Y%m%d-%H%M%S)}
REPS=${REPS:-5}
SKIP=" ${SKIP:-} "
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x $ROOT/.venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHON ONEWELL="$PYTHON -m onewell"
say() { printf '[new_cpu] %s\n' "$*" >&2; }
has_flag() { grep -m1 '^flags' /proc/cpuinfo | grep -qw "$1"; }

# the paths this CPU has besides native: forced AVX2 where native is wider; AVX-VNNI where native is AVX-512 (on a
# CPU with AVX-VNNI and no AVX-512, native already is that path)
PATHS=(native)
if has_flag avx2 && { has_flag avx512f || has_flag avx_vnni; }; then PATHS+=(avx2); fi
if has_flag avx_vnni && has_flag avx512f; then PATHS+=(avxvnni); fi

mkdir -p "$OUT_DIR"
say "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) logical CPUs; paths: ${PATHS[*]}; into $OUT_DIR"
{ grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^vendor_id' /proc/cpuinfo; grep -m1 '^cpu family' /proc/cpuinfo
  grep -m1 '^model[[:space:]]*:' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; } > "$OUT_DIR/cpu.txt"

for isa in "${PATHS[@]}"; do
    say "llama.cpp for $isa: $(bash "$HERE/llamacpp_build.sh" --isa "$isa" llama-bench)"
done

if [[ $SKIP != *" pipes "* ]]; then
    say "execution pipes shared by the prefill tiles' instructions (x86_pipe_pairs.py)"
    "$PYTHON" "$HERE/prototypes/x86_pipe_pairs.py" > "$OUT_DIR/pipe-pairs.txt"
fi
if [[ $SKIP != *" decisions "* ]]; then
    say "per-CPU kernel choices (cpu_decisions.py)"
    "$PYTHON" "$HERE/cpu_decisions.py" --reps "$REPS" --out "$OUT_DIR/cpu-decisions.md"
fi
if [[ $SKIP != *" vs "* ]]; then
    for isa in "${PATHS[@]}"; do
        say "side by side, $isa path"
        isa_arg=(); [[ $isa == native ]] || isa_arg=(--isa "$isa")
        OUT_DIR=$OUT_DIR/$isa bash "$HERE/vs_llamacpp.sh" "${isa_arg[@]}" -t 1,2 -p 128 -n 32 -r "$REPS"
    done
fi
if [[ $SKIP != *" kv "* ]]; then
    for isa in "${PATHS[@]}"; do
        [[ $isa != avxvnni ]] || continue   # depth runs on native and forced AVX2, issue 14's two paths
        say "decode at depth 4,096, f16 cache, $isa path"
        LLAMA_ISA=$isa KV_TYPES=f16 THREADS=2 REPS=3 OUT_DIR=$OUT_DIR/kv-$isa bash "$HERE/kv_depth.sh"
    done
fi

say "summary"
set +e
# issue 14's targets (targets/issue14-avx2.txt: the AVX2 path 1.3x llama.cpp in tg32, and in pp128 on Qwen; tg32
# after 4,096 tokens 1.3x at 2 threads) and, on a CPU whose AVX-512 ratios docs/perf-log.md recorded, those ratios
# as floors (targets/avx512-VENDOR-FAMILY-MODEL.txt, cpuid's decimal family and model; -FAMILY.txt where the model
# was not recorded)
TARGETS=(--targets "$HERE/targets/issue14-avx2.txt")
VENDOR=$(grep -m1 '^vendor_id' /proc/cpuinfo | grep -q AuthenticAMD && echo amd || echo intel)
FAMILY=$(grep -m1 '^cpu family' /proc/cpuinfo | tr -dc 0-9)
MODEL=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | tr -dc 0-9)
for FLOORS in "$HERE/targets/avx512-$VENDOR-$FAMILY-$MODEL.txt" "$HERE/targets/avx512-$VENDOR-$FAMILY.txt"; do
    if [[ -f $FLOORS ]]; then TARGETS+=(--targets "$FLOORS"); say "AVX-512 floors: $FLOORS"; break; fi
done
"$PYTHON" "$HERE/vs_summary.py" "$OUT_DIR" "${TARGETS[@]}" | tee "$OUT_DIR/summary.md"
status=${PIPESTATUS[0]}
set -e
say "results in $OUT_DIR (summary.md, cpu-decisions.md)"
exit "$status"
