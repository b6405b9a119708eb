#!/usr/bin/env bash
# Decode at depth per KV cache type, side by side with llama.cpp (issue 14 item 3): for each --kv-type, one
# `onewell bench` run of tg32 after 0 and after D context tokens, interleaved with llama-bench given the same
# -d and -ctk/-ctv. Writes a table and JSON per type; the ratios are in each table's comparison section.
#
# usage: benchmarks/kv_depth.sh [MODEL] [extra onewell bench options]
#   MODEL        registry name or .gguf (default qwen2.5-coder-0.5b-instruct, the Q4_K_M default model)
# environment:
#   LLAMA_BENCH  llama-bench to compare with (default: build 11434 for LLAMA_ISA, by benchmarks/llamacpp_build.sh)
#   LLAMA_ISA    native (default), avx2 or avxvnni: the ISA path of both engines (llama.cpp's build, onewell --isa)
#   KV_TYPES     types to run (default "f32 f16 q8_0")
#   DEPTH        context tokens (default 4096); THREADS (default 2); REPS (default 5)
#   OUT_DIR      where results go (default ./bench-results/kv-<UTC date-time>)
#   PYTHON       the Python with onewell installed (default python3): runs `$PYTHON -m onewell` when there is no
#                `onewell` command, and llamacpp_build.sh
#   ONEWELL      the onewell command (default: `onewell`, else `$PYTHON -m onewell`)
# Run it on a quiet machine. Each repetition of a depth test first evaluates DEPTH tokens on llama.cpp's side
# (llama-bench does so, untimed); at 2 threads and 4096 tokens that is tens of seconds per repetition.
set -euo pipefail

MODEL=${1:-qwen2.5-coder-0.5b-instruct}
shift || true
PYTHON=${PYTHON:-python3}
LLAMA_BENCH=${LLAMA_BENCH:-$(PYTHON=$PYTHON bash "$(dirname "$0")/llamacpp_build.sh" --isa "${LLAMA_ISA:-native}" llama-bench)}
KV_TYPES=${KV_TYPES:-"f32 f16 q8_0"}
DEPTH=${DEPTH:-4096}
THREADS=${THREADS:-2}
REPS=${REPS:-5}
OUT_DIR=${OUT_DIR:-bench-results/kv-$(date -u +%Y%m%d-%H%M%S)}
if [[ -n "${ONEWELL:-}" ]]; then read -r -a OW <<<"$ONEWELL"
elif command -v onewell >/dev/null; then OW=(onewell)
else OW=("$PYTHON" -m onewell); fi
[[ -x $LLAMA_BENCH ]] || { echo "kv_depth.sh: no llama-bench at $LLAMA_BENCH" >&2; exit 2; }

isa_args=(); [[ ${LLAMA_ISA:-native} == native ]] || isa_args=(--isa "$LLAMA_ISA")
mkdir -p "$OUT_DIR"
for kv in $KV_TYPES; do
    name=$(basename "$MODEL" .gguf | tr ':/' '__')-$kv
    echo "[kv_depth] $MODEL, --kv-type $kv, tg32 at depth 0 and $DEPTH, $THREADS thread(s)" >&2
    "${OW[@]}" bench "$MODEL" "${isa_args[@]}" -t "$THREADS" -p 0 -n 32 -d "0,$DEPTH" -r "$REPS" --kv-type "$kv" \
        --vs "llama.cpp=$LLAMA_BENCH" --json "$OUT_DIR/$name.json" "$@" | tee "$OUT_DIR/$name.txt"
done
echo "[kv_depth] results in $OUT_DIR" >&2
