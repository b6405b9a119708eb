"""`onewell bandwidth`: how fast this machine streams memory, per thread count — the ceiling a decode step is
measured against (bandwidth utilization = bytes read per token x tokens/s / this number).

Kinds (C kernels in onewell/_native/bandwidth.c, AVX-512/AVX2/generic by CPU):
    read      sum-reduce of one array                              traffic = 1 array
    triad     a = b + s*c, ordinary stores                         traffic counted = 3 arrays (the write-allocate
                                                                   read of `a` happens but is not counted, as in STREAM)
    triad_nt  the same with non-temporal (streaming) stores        traffic = 3 arrays (no write-allocate)
Arrays together take --size-mb MiB (default 1 GiB, far above any last-level cache), split across the threads,
first-touched by the thread that streams them. GB = 1e9 bytes. One warm-up repetition is run and dropped.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field

from onewell._native import _core
from onewell.runtime.native_ops import MAX_THREADS, ThreadPool

KINDS = {"read": 0, "triad": 1, "triad_nt": 2}
TRIAD_CHECK = 1.0 + 3.0 * 2.0  # every element of a after a triad: b + s*c with b = 1, c = 2, s = 3


@dataclass
class BandwidthResult:
    kind: str
    threads: int
    size_mb: float            # MiB allocated in all (the arrays of this kind together)
    traffic_bytes: int        # bytes counted per repetition
    seconds: list[float] = field(repr=False)
    isa: str = ""

    @property
    def gbps(self) -> list[float]:
        return [self.traffic_bytes / s / 1e9 for s in self.seconds]

    @property
    def gbps_median(self) -> float:
        return statistics.median(self.gbps)

    @property
    def gbps_min(self) -> float:
        return min(self.gbps)

    @property
    def gbps_max(self) -> float:
        return max(self.gbps)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(reps=len(self.seconds), gbps_median=self.gbps_median, gbps_min=self.gbps_min, gbps_max=self.gbps_max)
        return d


def _check_checksum(kind: str, traffic_bytes: int, checksum: float) -> None:
    n = traffic_bytes // 8 // (1 if kind == "read" else 3)  # elements per array
    expect = float(n) if kind == "read" else TRIAD_CHECK * n   # read: every element is 1.0; triad: sum of a
    if checksum != expect:
        raise RuntimeError(f"bandwidth {kind}: checksum {checksum!r} != {expect!r}: the kernel computed something else")


def measure_bandwidth(threads: list[int] | tuple[int, ...] = (1,), size_mb: float = 1024, reps: int = 10,
                      kinds: tuple[str, ...] | list[str] = tuple(KINDS)) -> list[BandwidthResult]:
    """Measures each kind at each thread count (a fresh pool per count); one result per (threads, kind)."""
    threads = list(threads)
    if not threads or any(isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= MAX_THREADS for t in threads):
        raise ValueError(f"threads must be a non-empty list of ints in 1..{MAX_THREADS}, got {threads!r}")
    if not (isinstance(size_mb, (int, float)) and math.isfinite(size_mb) and 0 < size_mb <= 1 << 22):
        raise ValueError(f"size_mb must be a positive number of MiB, got {size_mb!r}")
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 10000:
        raise ValueError(f"reps must be an int in 1..10000, got {reps!r}")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be among {tuple(KINDS)}, got {list(kinds)!r}")
    total_bytes = max(64, int(size_mb * (1 << 20)))
    isa = _core.bandwidth_isa()
    results = []
    for n in threads:
        with ThreadPool(n) as pool:
            for kind in kinds:
                seconds, traffic, checksum = _core.bandwidth_run(pool.capsule, KINDS[kind], total_bytes, reps + 1)
                _check_checksum(kind, traffic, checksum)
                results.append(BandwidthResult(kind, n, total_bytes / (1 << 20), traffic, seconds[1:], isa))
    return results


def format_table(results: list[BandwidthResult]) -> str:
    if not results:
        return "no results"
    first = results[0]
    lines = [f"memory bandwidth: {first.size_mb:g} MiB per kind, {len(first.seconds)} reps, "
             f"ISA {first.isa}, GB = 1e9 B (triad counts 3 arrays)",
             f"{'threads':>7}  {'kind':<9} {'median GB/s':>11} {'min':>8} {'max':>8}"]
    for r in results:
        lines.append(f"{r.threads:>7}  {r.kind:<9} {r.gbps_median:>11.1f} {r.gbps_min:>8.1f} {r.gbps_max:>8.1f}")
    return "\n".join(lines)


def _thread_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--threads wants comma-separated ints, got {text!r}") from None
    if not values or any(not 1 <= v <= MAX_THREADS for v in values):
        raise argparse.ArgumentTypeError(f"--threads values must be 1..{MAX_THREADS}, got {text!r}")
    return values


def _kind_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or any(v not in KINDS for v in values):
        raise argparse.ArgumentTypeError(f"--kinds must be among {','.join(KINDS)}, got {text!r}")
    return values


def build_parser(prog: str = "onewell bandwidth") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Measure sustained memory bandwidth (read, triad) per thread count.")
    p.add_argument("--threads", type=_thread_list, default=[1, 2], help="comma-separated thread counts (default 1,2)")
    p.add_argument("--size-mb", type=float, default=1024, help="MiB of arrays per kind (default 1024)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions (default 10)")
    p.add_argument("--kinds", type=_kind_list, default=list(KINDS), help="read,triad,triad_nt (default all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        results = measure_bandwidth(args.threads, args.size_mb, args.reps, args.kinds)
    except ValueError as e:
        parser.error(str(e))
    except MemoryError:
        print(f"onewell bandwidth: could not allocate {args.size_mb:g} MiB", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
