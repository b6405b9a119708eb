#!/usr/bin/env bash
# Record llama.cpp's logits on the random-weight qwen3 / llama 3 / phi3 models (tests/random_models.py) into
# tests/data/llamacpp_logits_random.json. Run once; the tests rebuild the models from their seeds and compare.
#   1. builds scripts/llamacpp_logits.c against libllama of llama.cpp build 11434, native for this CPU
#      (benchmarks/llamacpp_build.sh fetches the pinned sdist and builds it; ONEWELL_LLAMA_DIR as there);
#   2. runs scripts/record_llamacpp_logits.py: build each model, run llama.cpp over its text, keep top-K per position.
# usage: scripts/record_llamacpp_logits.sh        environment: ONEWELL_LLAMA_DIR, PYTHON, OUT, TOP_K, THREADS
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${OUT:-$ROOT/tests/data/llamacpp_logits_random.json}
say() { printf '[record_llamacpp_logits] %s\n' "$*" >&2; }

# libllama of the native build, made (or made again, when the cache holds one from another CPU) for this CPU
LIB=$(dirname "$(PYTHON=$PYTHON bash "$ROOT/benchmarks/llamacpp_build.sh" llama)")
SRC=$(dirname "$(dirname "$LIB")")

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" "$ROOT/scripts/llamacpp_logits.c" \
   -L"$LIB" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$LIB" -o "$WORK/llamacpp_logits"
"$PYTHON" "$ROOT/scripts/record_llamacpp_logits.py" "$WORK/llamacpp_logits" "$WORK" "$OUT" \
    --top-k "${TOP_K:-32}" --threads "${THREADS:-2}"
say "wrote $OUT"
