"""`onewell bench MODEL`: tok/s per thread count, GB/s, bandwidth utilization, Amdahl fit, per-op time.

    onewell bench qwen2.5-coder-0.5b-instruct                   # pp128 + tg32 at 1, 2, 4, ... cores threads
    onewell bench MODEL -t 1,2 -p 128 -n 32 -r 5 --json out.json --plot out.png
    onewell bench MODEL --vs llama.cpp=/path/to/llama-bench     # llama-bench rows, interleaved, and the ratio
    onewell bench MODEL -t 2 -p 0 -n 32 -d 0,4096 --kv-type f16   # tg32 and tg32@d4096 (after 4096 tokens)

The method (docs/benchmarking.md): measure the read bandwidth at each thread count, then time the engine's
prompt processing and generation there, and relate the two through the bytes of weights each token reads.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Callable

from onewell.argtypes import positive_int
from onewell.bench import llamacpp, machine as machine_mod
from onewell.bench.report import build_report, render_report
from onewell.bench.runner import BenchTest, context_needed, make_tests, run_benchmark
from onewell.errors import OnewellError


def _int_list(text: str, minimum: int) -> list[int]:
    """"1,2,4" or "1-4" (or both: "1-2,8") -> sorted distinct whole numbers >= minimum."""
    values: set[int] = set()
    try:
        for part in text.split(","):
            low, sep, high = part.strip().partition("-")
            start = int(low)
            stop = int(high) if sep else start
            if stop < start:
                raise ValueError
            values.update(range(start, stop + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,2,4 or 1-4, got {text!r}") from None
    if min(values) < minimum:
        raise argparse.ArgumentTypeError(f"values must be at least {minimum}, got {text!r}")
    return sorted(values)




def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onewell bench",
        description="Measure prompt processing (pp) and generation (tg) speed per thread count, the memory "
                    "bandwidth they are bounded by, how much of it is used, and how threads scale (Amdahl).")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("-t", "--threads", type=lambda s: _int_list(s, 1), default=None,
                   help="thread counts, e.g. 1,2,4 or 1-8 (default: 1, 2, 4, ... up to the physical cores, "
                        "and the core count itself)")
    p.add_argument("-p", "--n-prompt", type=lambda s: _int_list(s, 0), default=[128],
                   help="prompt sizes to time (pp); 0 = none (default 128)")
    p.add_argument("-n", "--n-gen", type=lambda s: _int_list(s, 0), default=[32],
                   help="tokens to generate (tg); 0 = none (default 32)")
    p.add_argument("-d", "--n-depth", type=lambda s: _int_list(s, 0), default=[0],
                   help="context tokens in the KV cache before each test, e.g. 0,4096 (llama-bench's -d; "
                        "tests at depth D are named tg32@d4096; default 0)")
    p.add_argument("--kv-type", choices=("f32", "f16", "q8_0"), default="f16",
                   help="KV cache element type (default f16); llama-bench gets the same as -ctk/-ctv")
    p.add_argument("-r", "--reps", type=positive_int, default=5, help="repetitions of each test (default 5)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="skip the untimed warm-up run at each thread count")
    p.add_argument("--backend", choices=("native", "reference"), default="native",
                   help="engine to time (reference: the slow numpy oracle; ignores --threads)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random token ids (default 0)")
    p.add_argument("--isa", choices=("generic", "avx2", "avxvnni", "avx512"), default=None,
                   help="cap the native core's instruction set, as ONEWELL_ISA does (shown in the header): "
                        "measure the AVX2 path on an AVX-512 machine against a llama.cpp built for AVX2 "
                        "(avx2: no AVX-VNNI either; avxvnni: AVX2 with AVX-VNNI, as Intel client CPUs run)")
    bw = p.add_argument_group("memory bandwidth (measured at each thread count, before the engine runs)")
    bw.add_argument("--bandwidth-size-mb", type=positive_int, default=1024,
                    help="buffer size; keep it far above the L3 cache (default 1024)")
    bw.add_argument("--bandwidth-reps", type=positive_int, default=10, help="repetitions (default 10)")
    bw.add_argument("--no-bandwidth", action="store_true", help="skip it: no utilization or ceiling then")
    out = p.add_argument_group("output")
    out.add_argument("--json", nargs="?", const="-", metavar="FILE",
                     help="write the report as JSON (docs/benchmarking.md has the schema); no FILE or '-' = "
                          "stdout, and the table then goes to stderr (give it after MODEL)")
    out.add_argument("--plot", metavar="FILE.png", help="draw tok/s vs threads, the bandwidth ceiling and the "
                                                        "per-op time into a PNG (needs matplotlib)")
    out.add_argument("--no-profile", dest="profile", action="store_false",
                     help="skip the per-op breakdown of a generated token")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--vs", metavar="llama.cpp[=PATH]",
                   help="also run llama-bench on the same model, interleaved with onewell's repetitions "
                        "(PATH: the binary or its folder; else $LLAMA_BENCH, else llama-bench on PATH)")
    return p


def set_isa_cap(isa: str) -> None:
    """Cap the kernel path for this process (the native core reads ONEWELL_ISA whenever it picks a path); a cap
    above what the CPU has would silently measure a lower path, so it is refused."""
    os.environ["ONEWELL_ISA"] = isa
    try:
        from onewell._native import _core
    except ImportError as e:
        raise OnewellError(f"--isa needs the native core ({e})") from None
    if _core.cpu_features().get("isa") != isa:
        raise OnewellError(f"--isa {isa}: this CPU has no such level (it would run "
                           f"{_core.cpu_features().get('isa')})")


def model_facts(path: Path, reader, spec) -> dict:
    from onewell.gguf.constants import FILE_TYPE

    names = {v: k.upper() for k, v in FILE_TYPE.items()}
    ftype = reader.metadata.get("general.file_type")
    name = reader.metadata.get("general.name")
    return {"path": str(path), "name": str(name) if name is not None else None, "arch": spec.config.arch,
            "file_type": names.get(ftype, str(ftype)) if ftype is not None else None,
            "file_bytes": path.stat().st_size, "weight_bytes_per_token": int(spec.bytes_per_token())}


def read_bandwidth_stats(results, threads: int) -> dict[str, float]:
    """{"median", "min", "max"} read GB/s at `threads` from measure_bandwidth's list of BandwidthResult."""
    for r in results:
        if r.kind == "read" and r.threads == threads:
            return {"median": r.gbps_median, "min": r.gbps_min, "max": r.gbps_max}
    raise OnewellError(f"the bandwidth probe returned no read result for {threads} thread(s)")


def bandwidth_probe(size_mb: int, reps: int) -> Callable[[int], dict[str, float]]:
    try:
        from onewell.bench.bandwidth import measure_bandwidth
    except ImportError as e:
        raise OnewellError(f"the bandwidth probe cannot be loaded ({e}); rerun with --no-bandwidth") from None

    def probe(threads: int) -> dict[str, float]:
        try:
            results = measure_bandwidth([threads], size_mb=size_mb, reps=reps, kinds=("read",))
        except MemoryError:
            raise OnewellError(f"could not allocate {size_mb} MiB for the bandwidth probe; "
                               f"use a smaller --bandwidth-size-mb or --no-bandwidth") from None
        except ValueError as e:
            raise OnewellError(f"bandwidth probe: {e}") from None
        return read_bandwidth_stats(results, threads)

    return probe


class LlamaBenchSide:
    """The comparison engine: one llama-bench repetition of every test at a thread count per call."""

    def __init__(self, binary: Path, model: Path, tests: list[BenchTest], kv_type: str | None = None):
        self.binary, self.model, self.kv_type = binary, model, kv_type
        self.n_prompt = sorted({t.n_tokens for t in tests if t.kind == "pp"})
        self.n_gen = sorted({t.n_tokens for t in tests if t.kind == "tg"})
        self.depths = sorted({t.depth for t in tests})
        self.info: dict | None = None

    def __call__(self, threads: int) -> dict[str, float]:
        rows = llamacpp.run_llama_bench(self.binary, self.model, threads, self.n_prompt, self.n_gen, reps=1,
                                        depths=self.depths, kv_type=self.kv_type)
        if self.info is None:
            self.info = llamacpp.version_info(rows, self.binary)
        return {row.test: row.seconds[0] for row in rows}


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict:
    from onewell.gguf import GGUFReader
    from onewell.hub import ensure_model
    from onewell.models.registry import load_spec
    from onewell.runtime.backend import create_backend

    from onewell.runtime.kv_cache import check_kv_type
    from onewell.runtime.memory import kv_cache_bytes

    tests = make_tests(args.n_prompt, args.n_gen, args.n_depth)
    path = Path(ensure_model(args.model, progress=not args.quiet))
    reader = GGUFReader(path)
    spec = load_spec(reader)
    try:
        kv_type = check_kv_type(args.kv_type, spec.config.head_dim)
    except ValueError as e:
        raise OnewellError(f"--kv-type: {e}") from None
    machine = machine_mod.machine_info()
    threads = args.threads or machine_mod.default_thread_counts(machine["allowed_physical_cores"])
    notes: list[str] = []
    if args.backend == "reference":
        notes.append("the reference backend computes with float32 copies of the weights (4 bytes a weight), not "
                     "the quantized bytes, and ignores the thread count (numpy's BLAS picks its own): its GB/s, "
                     "utilization and scaling describe neither the model's bytes nor the engine")
    llc = machine.get("last_level_cache_bytes")
    if not args.no_bandwidth and llc and args.bandwidth_size_mb * (1 << 20) < 4 * llc:
        notes.append(f"the bandwidth buffer ({args.bandwidth_size_mb} MiB) is under 4x the last-level cache "
                     f"({llc >> 20} MiB): part of it is served from cache, so read bandwidth is overstated")
    over = [t for t in threads if t > len(machine["allowed_cpus"])]
    if over:
        notes.append(f"{', '.join(map(str, over))} threads exceed the {len(machine['allowed_cpus'])} CPUs this "
                     f"process may use: threads share CPUs and time slices")
    load = machine.get("load_average")
    if load and load[0] > 0.5:
        notes.append(f"load average {load[0]:.2f} at start: other work is running, expect noisy results")

    backend_class: list[str] = []
    max_batch: list[int | None] = []

    def make_backend(t: int):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backend = create_backend(args.backend, spec, n_ctx=context_needed(tests) + 16, threads=t,
                                     kv_type=kv_type)
        for w in caught:
            if str(w.message) not in notes:
                notes.append(str(w.message))
        backend_class.append(type(backend).__name__)
        max_batch.append(getattr(backend, "max_batch", None))
        return backend

    other = None
    if args.vs is not None:
        other_kv = llamacpp.llama_bench_kv_type(kv_type)
        if other_kv != kv_type:
            print(f"onewell bench: note: llama-bench has no {kv_type} KV cache; llama.cpp runs with its default, f16",
                  file=sys.stderr)
        other = LlamaBenchSide(llamacpp.find_llama_bench(llamacpp.parse_vs(args.vs)), path, tests, other_kv)
    probe = None if args.no_bandwidth else bandwidth_probe(args.bandwidth_size_mb, args.bandwidth_reps)
    tg_sizes = [t.n_tokens for t in tests if t.kind == "tg"]
    result = run_benchmark(
        make_backend, spec.config.n_vocab, tests, threads, args.reps, warmup=args.warmup, seed=args.seed,
        bandwidth=probe, other=other, other_name=llamacpp.ENGINE_NAME,
        profile_threads=max(threads) if args.profile else None,
        profile_n_tokens=min(tg_sizes) if tg_sizes else 16, log=log)
    settings = {
        "backend": args.backend, "backend_class": backend_class[0] if backend_class else "?",
        "threads": list(threads), "tests": [t.name for t in tests], "reps": args.reps, "warmup": args.warmup,
        "seed": args.seed, "bandwidth_size_mb": None if args.no_bandwidth else args.bandwidth_size_mb,
        "bandwidth_reps": None if args.no_bandwidth else args.bandwidth_reps,
        "max_batch": max_batch[0] if max_batch else None,
        "kv_type": kv_type, "depths": sorted({t.depth for t in tests}),
        "kv_bytes": kv_cache_bytes(spec.config, context_needed(tests) + 16, kv_type=kv_type),
    }
    model = {**model_facts(path, reader, spec), "kv_bytes_per_token": kv_cache_bytes(spec.config, 1, kv_type=kv_type)}
    return build_report(result, tests=tests, machine=machine, model=model,
                        settings=settings, llamacpp=other.info if other else None, warnings=notes)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.vs is not None:
        llamacpp.parse_vs(args.vs)  # a bad --vs fails now, not after minutes of measuring
    for option, value in (("--json", args.json), ("--plot", args.plot)):
        if value and value != "-" and not Path(value).expanduser().resolve().parent.is_dir():
            raise OnewellError(f"{option} {value}: the folder does not exist")  # before minutes of measuring
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - fail before measuring, not after
        except ModuleNotFoundError:
            raise OnewellError("--plot needs matplotlib: pip install 'onewell[bench]'") from None
    if args.isa:
        set_isa_cap(args.isa)
    log = (lambda _msg: None) if args.quiet else (lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True))
    report = run(args, log)
    json_to_stdout = args.json == "-"
    print(render_report(report), end="", file=sys.stderr if json_to_stdout else sys.stdout, flush=True)
    if args.json:
        text = json.dumps(report, indent=2) + "\n"
        if json_to_stdout:
            sys.stdout.write(text)
        else:
            try:
                Path(args.json).write_text(text)
            except OSError as e:
                raise OnewellError(f"cannot write {args.json}: {e.strerror}") from None
            log(f"JSON written to {args.json}")
    if args.plot:
        from onewell.bench.plot import write_plot

        try:
            write_plot(report, args.plot)
        except OSError as e:
            raise OnewellError(f"cannot write {args.plot}: {e.strerror}") from None
        log(f"plot written to {args.plot}")
    return 0
