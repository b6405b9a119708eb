"""Build of the native core (`onewell._native`).

One C extension, compiled with the same portable flags for every CPU. Code for wider ISAs (AVX2, AVX-512)
lives in its own files whose functions carry `__attribute__((target(...)))`, so a single build holds every
path and the best one is chosen at run time from the CPU's features (see `_native/cpu_features.c`).
"""
import os
import sys
from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("src/onewell/_native")
sources = sorted(str(p) for p in NATIVE.rglob("*.c"))
# headers and included kernel bodies: a change to any of them rebuilds the extension
depends = sorted(str(p) for p in NATIVE.rglob("*") if p.suffix in (".h", ".inc"))

extra_compile_args = ["-O3", "-std=c11", "-fvisibility=hidden", "-fno-math-errno", "-Wall", "-Wno-unused-function"]
extra_link_args = ["-pthread"]
if os.environ.get("ONEWELL_SANITIZE"):
    # AddressSanitizer + UBSan build of the native core (see docs/reliability.md)
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    extra_compile_args += san
    extra_link_args += san
if sys.platform == "win32":
    raise SystemExit("onewell's native core needs gcc or clang (Linux, macOS)")

setup(
    ext_modules=[
        Extension(
            "onewell._native._core",
            sources=sources,
            depends=depends,
            include_dirs=[str(NATIVE)],
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args,
        )
    ]
)
