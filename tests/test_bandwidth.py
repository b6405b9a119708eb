"""The bandwidth probe: its kernels compute what they claim (checksums), and the numbers are sane. Small
buffers only: the real measurement (1 GiB) is `onewell bandwidth`, not a test."""
import json
import math

import numpy as np
import pytest

from onewell._native import _core
from onewell.bench import bandwidth
from onewell.runtime.native_ops import ThreadPool


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [0, 1, 7, 63, 64, 65, 1000, 262_145, 1_000_003])
def test_read_kernel_sums_like_numpy(threads, n):
    x = np.random.default_rng(n).random(n)
    with ThreadPool(threads) as pool:
        got = _core.bandwidth_read_sum(pool.capsule, x, n)
    assert got == pytest.approx(float(np.sum(x)), rel=1e-12, abs=1e-12)


def test_read_kernel_without_pool():
    x = np.arange(1001, dtype=np.float64)
    assert _core.bandwidth_read_sum(None, x, x.size) == 1001 * 1000 / 2


@pytest.mark.parametrize("kind", list(bandwidth.KINDS))
def test_run_reports_per_rep_seconds_and_checksum(kind):
    with ThreadPool(2) as pool:
        seconds, traffic, checksum = _core.bandwidth_run(pool.capsule, bandwidth.KINDS[kind], 3 << 20, 3)
    arrays = 1 if kind == "read" else 3
    assert len(seconds) == 3 and all(s > 0 and math.isfinite(s) for s in seconds)
    assert traffic % (arrays * 64) == 0 and (3 << 20) - arrays * 64 < traffic <= 3 << 20
    assert checksum == (traffic / 8 if kind == "read" else 7.0 * traffic / 24)


def test_measure_bandwidth_is_sane():
    results = bandwidth.measure_bandwidth(threads=[1, 2], size_mb=4, reps=3)
    assert [(r.threads, r.kind) for r in results] == [(t, k) for t in (1, 2) for k in bandwidth.KINDS]
    for r in results:
        assert len(r.seconds) == 3
        assert all(math.isfinite(g) and g > 0 for g in r.gbps)
        assert r.gbps_min <= r.gbps_median <= r.gbps_max
        assert r.isa in ("avx512", "avx2", "generic")   # aarch64 runs the generic (compiler-vectorized) probe
        assert r.to_dict()["gbps_median"] == r.gbps_median


def test_cli_json_and_table(capsys):
    assert bandwidth.main(["--threads", "1", "--size-mb", "2", "--reps", "2", "--kinds", "read,triad_nt", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["kind"] for d in data] == ["read", "triad_nt"]
    assert all(d["reps"] == 2 and d["gbps_median"] > 0 for d in data)
    assert bandwidth.main(["--threads", "1,2", "--size-mb", "2", "--reps", "1", "--kinds", "read"]) == 0
    table = capsys.readouterr().out
    assert "GB = 1e9 B" in table and "median GB/s" in table
    assert len(table.strip().splitlines()) == 2 + 2


@pytest.mark.parametrize("argv", [["--threads", "0"], ["--threads", "a"], ["--kinds", "write"], ["--reps", "0"],
                                  ["--size-mb", "-1"]])
def test_cli_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as e:
        bandwidth.main(argv)
    assert e.value.code == 2


def test_measure_rejects_bad_arguments():
    with pytest.raises(ValueError):
        bandwidth.measure_bandwidth(threads=[], size_mb=1)
    with pytest.raises(ValueError):
        bandwidth.measure_bandwidth(threads=[1], size_mb=1, kinds=["nope"])
    with pytest.raises(ValueError):
        _core.bandwidth_run(None, 7, 1 << 20, 1)


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
def test_every_isa_path_of_the_probe(isa, monkeypatch):
    """Each probe kernel this CPU has, forced by ONEWELL_ISA; an ISA above the CPU's leaves the probe on the best it
    has (ONEWELL_ISA only caps)"""
    monkeypatch.delenv("ONEWELL_ISA", raising=False)
    best = _core.cpu_features()["isa"]
    order = ["generic", "avx2", "avx512"]
    probe_best = {"avxvnni": "avx2"}.get(best, best)   # AVX-VNNI CPUs run the AVX2 probe
    probe_best = probe_best if probe_best in order else "generic"   # aarch64 (neon, dotprod): the generic kernels
    monkeypatch.setenv("ONEWELL_ISA", isa)  # the probe picks its kernels at every run
    assert _core.bandwidth_isa() == (isa if order.index(isa) <= order.index(probe_best) else probe_best)
    x = np.random.default_rng(2).random(100_001)
    with ThreadPool(2) as pool:
        assert _core.bandwidth_read_sum(pool.capsule, x, x.size) == pytest.approx(float(np.sum(x)), rel=1e-12)
        for kind in bandwidth.KINDS.values():
            seconds, traffic, checksum = _core.bandwidth_run(pool.capsule, kind, 1 << 20, 2)
            assert checksum == (traffic / 8 if kind == 0 else 7.0 * traffic / 24)
