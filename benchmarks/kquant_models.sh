#!/usr/bin/env bash
# onewell vs llama.cpp on models whose every matrix is a K-quant, as users' Q2_K ... Q6_K downloads of Llama-shaped
# models are (the registry's models are narrower than 256 in places, so most of their matrices fall back to Q5_0 /
# Q8_0; no such real model is on the registry):
#   1. builds a random-weight Llama-3.2-shaped model in F16 with onewell's GGUF writer (tests/random_models.py:
#      the llama-bpe vocabulary, 1024 wide, 8 layers, 16 heads / 4 KV heads, FFN 4096, tied embeddings; 0.25 B
#      parameters);
#   2. quantizes it with llama.cpp 11434's own llama-quantize to each type (benchmarks/llamacpp_build.sh builds it);
#   3. runs `onewell bench FILE --vs llama.cpp=...` on each, interleaved, into OUT_DIR.
# Random weights time the same as trained ones (the kernels read every byte whatever the values).
#
# usage: benchmarks/kquant_models.sh [--isa avx2|avxvnni] [onewell bench options, e.g. -t 1,2 -p 128 -n 32 -r 5]
# environment:
#   TYPES     llama-quantize types (default: Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K; also IQ4_XS IQ4_NL, perf-log 33)
#   WORK_DIR  where the model files go (default ~/.cache/onewell/kquant-models; ~1.7 GB with all five)
#   OUT_DIR   results (default ./bench-results/kquant-<UTC date-time>)
#   PYTHON    the Python with onewell installed (default python3)
set -euo pipefail

ISA=native
if [[ ${1:-} == --isa ]]; then ISA=$2; shift 2; fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
TYPES=${TYPES:-"Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K"}
WORK_DIR=${WORK_DIR:-$HOME/.cache/onewell/kquant-models}
OUT_DIR=${OUT_DIR:-bench-results/kquant-$(date -u +%Y%m%d-%H%M%S)}
say() { printf '[kquant_models] %s\n' "$*" >&2; }

mkdir -p "$WORK_DIR" "$OUT_DIR"
F16=$WORK_DIR/llama-k-f16.gguf
if [[ ! -s $F16 ]]; then
    say "building $F16"
    "$PYTHON" - "$F16" "$ROOT" <<'EOF'
import sys
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[2]) / "tests"))
import random_models  # noqa: E402  (test helper: the recipe builder and the vocabularies)
from onewell.gguf import GGMLType  # noqa: E402
from onewell.models.common import Hyperparameters  # noqa: E402

F16 = GGMLType.F16
recipe = random_models.Recipe(
    "llama-k", "llama", "llama-bpe", seed=41, tied=True,
    hp=Hyperparameters(n_embd=1024, n_layer=8, n_head=16, n_head_kv=4, head_dim=64, n_ff=4096,
                       n_ctx_train=4096, rope_theta=500000.0, rms_eps=1e-5),
    types={role: F16 for role in ("token_embd", "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")},
    tokenizer_overrides={"tokenizer.ggml.add_bos_token": True})
random_models.build(recipe, sys.argv[1])
EOF
fi
QUANTIZE=$(PYTHON=$PYTHON bash "$ROOT/benchmarks/llamacpp_build.sh" --isa native llama-quantize)
BENCH=$(PYTHON=$PYTHON bash "$ROOT/benchmarks/llamacpp_build.sh" --isa "$ISA" llama-bench)
isa_args=(); [[ $ISA == native ]] || isa_args=(--isa "$ISA")
for type in $TYPES; do
    model=$WORK_DIR/llama-k-${type,,}.gguf
    if [[ ! -s $model ]]; then
        say "llama-quantize $type"
        "$QUANTIZE" "$F16" "$model.part" "$type" > "$model.log" 2>&1 || { cat "$model.log" >&2; exit 1; }
        mv "$model.part" "$model"
    fi
    tag=llama-k-${type,,}-$ISA
    say "$type ($model)"
    "$PYTHON" -m onewell bench "$model" "${isa_args[@]}" --vs "llama.cpp=$BENCH" --json "$OUT_DIR/$tag.json" \
        --plot "$OUT_DIR/$tag.png" "$@" | tee "$OUT_DIR/$tag.txt"
done
say "results in $OUT_DIR"
