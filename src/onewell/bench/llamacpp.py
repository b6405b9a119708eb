"""Run llama.cpp's llama-bench on the same model and read its JSON, for side-by-side rows in `onewell bench`.

llama-bench is found as: the path given to `--vs llama.cpp=PATH` (a binary or the folder holding it), else
$LLAMA_BENCH, else `llama-bench` on PATH. Each call runs one repetition (-r 1) of every test at one thread
count, so the bench can interleave it with onewell's repetitions (A B A B). llama-bench warms up before each
test itself (a full prompt run and one generated token) and excludes model loading from its times.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from onewell.errors import OnewellError

ENV_VAR = "LLAMA_BENCH"
ENGINE_NAME = "llama.cpp"


class LlamaBenchError(OnewellError):
    """llama-bench is missing, failed, or printed something that is not its JSON."""


@dataclass(frozen=True)
class LlamaBenchRow:
    test: str                # "pp128", "tg32" (with "@d512" when run at a context depth)
    n_threads: int
    samples_ns: tuple[int, ...]
    avg_ts: float            # llama-bench's own mean tok/s
    build_commit: str
    build_number: int
    cpu_info: str
    backends: str
    model_type: str
    model_size: int          # bytes of weights, llama-bench's count
    n_ubatch: int            # prompt tokens per forward chunk (0 if not reported)

    @property
    def seconds(self) -> list[float]:
        return [ns * 1e-9 for ns in self.samples_ns]


def parse_vs(value: str) -> str | None:
    """`--vs` value -> explicit llama-bench path (None: search for it). Accepts llama.cpp, llama.cpp=PATH."""
    name, sep, path = value.partition("=")
    if name.strip().lower() not in ("llama.cpp", "llamacpp", "llama-bench"):
        raise LlamaBenchError(f"--vs compares with llama.cpp only: use --vs llama.cpp or --vs llama.cpp=PATH, "
                              f"got {value!r}")
    if sep and not path.strip():
        raise LlamaBenchError("--vs llama.cpp=PATH needs a path after '='")
    return path.strip() or None


def find_llama_bench(explicit: str | None = None) -> Path:
    """The llama-bench executable to run; LlamaBenchError naming every place looked when there is none."""
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            path = path / "llama-bench"
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LlamaBenchError(f"llama-bench not found or not executable at {path}")
        return path
    env = os.environ.get(ENV_VAR)
    if env:
        return find_llama_bench(env)
    found = shutil.which("llama-bench")
    if found:
        return Path(found)
    raise LlamaBenchError(f"llama-bench not found: pass --vs llama.cpp=PATH, set ${ENV_VAR}, or put it on PATH "
                          f"(benchmarks/vs_llamacpp.sh builds one)")


def _test_name(entry: dict) -> str:
    n_prompt, n_gen, depth = int(entry.get("n_prompt", 0)), int(entry.get("n_gen", 0)), int(entry.get("n_depth", 0))
    if n_prompt > 0 and n_gen > 0:
        name = f"pp{n_prompt}+tg{n_gen}"
    elif n_prompt > 0:
        name = f"pp{n_prompt}"
    else:
        name = f"tg{n_gen}"
    return f"{name}@d{depth}" if depth else name


def parse_llama_bench_json(text: str) -> list[LlamaBenchRow]:
    """Rows of `llama-bench -o json` output (a JSON array of test objects)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("["), text.rfind("]")  # tolerate stray lines around the array
        try:
            data = json.loads(text[start:end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, list):
        raise LlamaBenchError(f"llama-bench output is not a JSON array: {text[:200]!r}")
    rows = []
    for i, entry in enumerate(data):
        try:
            samples = tuple(int(ns) for ns in entry["samples_ns"])
            if not samples or min(samples) <= 0:
                raise ValueError("no positive samples")
            rows.append(LlamaBenchRow(
                test=_test_name(entry), n_threads=int(entry["n_threads"]), samples_ns=samples,
                avg_ts=float(entry["avg_ts"]), build_commit=str(entry.get("build_commit", "")),
                build_number=int(entry.get("build_number", 0)), cpu_info=str(entry.get("cpu_info", "")),
                backends=str(entry.get("backends", "")), model_type=str(entry.get("model_type", "")),
                model_size=int(entry.get("model_size", 0)), n_ubatch=int(entry.get("n_ubatch", 0))))
        except (KeyError, TypeError, ValueError) as e:
            raise LlamaBenchError(f"llama-bench JSON entry {i} is not a test result ({e}): {entry!r:.200}") from None
    return rows


# KV cache types llama-bench 11434's -ctk/-ctv accept (tools/llama-bench: ggml_type_from_name): no f32
LLAMA_BENCH_KV_TYPES = frozenset({"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"})


def llama_bench_kv_type(kv_type: str | None) -> str | None:
    """The -ctk/-ctv llama-bench runs for onewell's `kv_type`: the same type where llama-bench has it, else None
    (its default, f16: llama-bench has no f32 cache, so an f32 run is compared with llama.cpp's f16)."""
    return kv_type if kv_type in LLAMA_BENCH_KV_TYPES else None


def llama_bench_command(binary: Path, model: Path, threads: int, n_prompt: Sequence[int], n_gen: Sequence[int],
                        reps: int = 1, depths: Sequence[int] = (0,), kv_type: str | None = None) -> list[str]:
    """depths: llama-bench's -d (--n-depth), context tokens before each test; kv_type: its -ctk/-ctv (KV cache
    element type, one of LLAMA_BENCH_KV_TYPES; None = its default, f16)."""
    sizes = lambda ns: ",".join(str(n) for n in ns) or "0"  # noqa: E731 - llama-bench: 0 = no test of that kind
    cmd = [str(binary), "-o", "json", "-m", str(model), "-p", sizes(n_prompt), "-n", sizes(n_gen),
           "-t", str(threads), "-r", str(reps)]
    if any(depths):
        cmd += ["-d", sizes(sorted(set(depths)))]
    if kv_type is not None:
        if kv_type not in LLAMA_BENCH_KV_TYPES:
            raise LlamaBenchError(f"llama-bench has no {kv_type!r} KV cache (it takes {sorted(LLAMA_BENCH_KV_TYPES)})")
        cmd += ["-ctk", kv_type, "-ctv", kv_type]
    return cmd


def run_llama_bench(binary: Path, model: Path, threads: int, n_prompt: Sequence[int], n_gen: Sequence[int],
                    reps: int = 1, timeout: float = 1800.0, depths: Sequence[int] = (0,),
                    kv_type: str | None = None) -> list[LlamaBenchRow]:
    cmd = llama_bench_command(binary, model, threads, n_prompt, n_gen, reps, depths, kv_type)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise LlamaBenchError(f"cannot run {binary}: {e}") from None
    except subprocess.TimeoutExpired:
        raise LlamaBenchError(f"llama-bench took more than {timeout:.0f} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise LlamaBenchError(f"llama-bench exited with {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return parse_llama_bench_json(proc.stdout)


def version_info(rows: Sequence[LlamaBenchRow], binary: Path) -> dict:
    """What the report records about the llama.cpp side."""
    first = rows[0] if rows else None
    return {"binary": str(binary), "build_commit": first.build_commit if first else None,
            "build_number": first.build_number if first else None, "cpu_info": first.cpu_info if first else None,
            "backends": first.backends if first else None, "model_type": first.model_type if first else None,
            "n_ubatch": first.n_ubatch if first and first.n_ubatch > 0 else None}
