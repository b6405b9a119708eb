"""What machine a benchmark ran on: CPU model, cores, where the process may run, the ISA path the kernels take.

Printed next to every result, because a tok/s number means nothing without it (and on a shared or virtual
machine, placement and load explain much of the run-to-run noise). Everything here only reads; nothing fails:
a fact this OS does not expose is reported as None.
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from onewell import __version__

SYS_CPU = Path("/sys/devices/system/cpu")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpuinfo() -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU (empty off Linux)."""
    text = _read(Path("/proc/cpuinfo"))
    if not text:
        return []
    blocks: list[dict[str, str]] = []
    for block in text.split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            blocks.append(entry)
    return blocks


def cpu_model(cpuinfo: list[dict[str, str]] | None = None) -> str:
    cpuinfo = _cpuinfo() if cpuinfo is None else cpuinfo
    for entry in cpuinfo:
        for key in ("model name", "Model", "cpu model", "Processor"):  # x86, ARM boards, MIPS, older ARM
            if entry.get(key):
                return entry[key]
    return platform.processor() or platform.machine() or "unknown CPU"


def allowed_cpus() -> list[int]:
    """Logical CPUs this process may run on (its affinity mask); all of them where the OS has no such call."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def core_of_cpu(cpu: int) -> tuple[str, str] | None:
    """(package, core) a logical CPU belongs to, from sysfs topology; None if unknown."""
    topo = SYS_CPU / f"cpu{cpu}" / "topology"
    package, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
    if package is None or core is None:
        return None
    return package, core


def physical_cores(cpus: list[int]) -> int:
    """Distinct physical cores among `cpus` (SMT siblings count once); len(cpus) when topology is unknown."""
    cores = [core_of_cpu(c) for c in cpus]
    if not cpus or any(c is None for c in cores):
        return max(1, len(cpus))
    return len(set(cores))


def last_level_cache_bytes() -> int | None:
    """Size of the largest cache level cpu0 sees (sysfs "32768K"); None if unknown. A bandwidth buffer must
    be far larger, or it measures the cache."""
    best: tuple[int, int] | None = None
    for index in (SYS_CPU / "cpu0" / "cache").glob("index[0-9]*"):
        level, size = _read(index / "level"), _read(index / "size")
        if not (level and level.isdigit() and size):
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        number, unit = (size[:-1], size[-1]) if size[-1] in units else (size, "")
        if not number.isdigit():
            continue
        entry = (int(level), int(number) * units.get(unit, 1))
        best = entry if best is None or entry > best else best
    return best[1] if best else None


def numa_nodes() -> int | None:
    nodes = Path("/sys/devices/system/node")
    if not nodes.is_dir():
        return None
    return sum(1 for p in nodes.glob("node[0-9]*") if p.is_dir()) or None


def cpu_ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5": the usual way to write an affinity mask."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive CPUs
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def default_thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to `cores`, plus `cores` itself: the points an Amdahl fit needs, without sweeping all."""
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    counts.append(max(1, cores))
    return counts


def isa_info() -> dict:
    """ISA the native core picked (after ONEWELL_ISA), the matmul kernel path, the CPU's vendor/family/model and
    the per-CPU kernel choices (decode prefetch distance, AVX-512 wide tiles, AVX2 float GEMM); None if the core is
    missing."""
    try:
        from onewell._native import _core
        from onewell.runtime.native_kernels import default_path
    except ImportError:
        return {"isa": None, "kernel_path": None, "cpu_features": {}}
    features = dict(_core.cpu_features())
    isa = features.pop("isa", None)
    ident = _core.cpu_identity()   # the decode prefetch distance depends on it (perf-log entry 19)
    cpu_id = f"{ident['vendor']} family {ident['family']} model {ident['model']}" if ident["vendor"] else None
    return {"isa": isa, "kernel_path": default_path(), "cpu_features": {k: bool(v) for k, v in features.items()},
            "cpu_id": cpu_id, "decode_prefetch_bytes": _core.r16_prefetch(-1),
            "wide_tiles": bool(_core.wide_tiles(-1)),   # AVX-512 prefill tiles, two rows per zmm (perf-log 24)
            "float_gemm": bool(_core.float_gemm(-1)),    # prefill as a float GEMM (perf-log 25, 28)
            "gemm_overlap": bool(_core.gemm_overlap(-1)),   # ... its next panel built between micro-kernel calls (28)
            "rows_gemm": bool(_core.rows_gemm_runs(default_path()))}   # the Q8_0 GEMM in int8, rows in the lanes (perf-log 29)


def machine_info() -> dict:
    """Facts about this machine and process, in the shape of the bench JSON's `machine` object."""
    cpuinfo = _cpuinfo()
    cpus = allowed_cpus()
    flags = cpuinfo[0].get("flags", "").split() if cpuinfo else []
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "cpu_model": cpu_model(cpuinfo),
        "logical_cpus": os.cpu_count() or len(cpus),
        "physical_cores": physical_cores(list(range(os.cpu_count() or len(cpus)))),
        "allowed_cpus": cpus,
        "allowed_physical_cores": physical_cores(cpus),
        "numa_nodes": numa_nodes(),
        "last_level_cache_bytes": last_level_cache_bytes(),
        "virtualized": "hypervisor" in flags if flags else None,
        "governor": _read(SYS_CPU / "cpu0" / "cpufreq" / "scaling_governor"),
        "load_average": load,
        **isa_info(),
        "isa_override": os.environ.get("ONEWELL_ISA"),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "onewell_version": __version__,
    }


def placement_note(machine: dict, threads: list[int]) -> str:
    """One line on where threads run: the affinity mask, and whether a thread count oversubscribes it."""
    cpus = machine["allowed_cpus"]
    note = f"process may run on CPUs {cpu_ranges(cpus)} ({len(cpus)} logical, {machine['allowed_physical_cores']} " \
           f"physical cores); threads are placed by the OS scheduler"
    over = [t for t in threads if t > len(cpus)]
    if over:
        note += f"; {', '.join(map(str, over))} threads oversubscribe them"
    return note
