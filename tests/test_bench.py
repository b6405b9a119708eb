"""`onewell bench`: the Amdahl fit, the report (JSON schema, table, plot), the timed runs, llama-bench parsing.

Most tests drive the pieces with fake backends and synthetic timings (fast, exact expectations); the `model`
tests run the whole command on SmolLM2 with tiny sizes. None of them is a benchmark: no speed is asserted.
"""
import json
import math
import os
import stat
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from onewell.bench import bench, llamacpp, machine
from onewell.bench.amdahl import UnderdeterminedFitError, fit_amdahl, next_thread_counts
from onewell.bench.report import SCHEMA, SCHEMA_VERSION, build_report, render_report
from onewell.bench.runner import BenchTest, EngineTimer, RunResult, make_tests, run_benchmark, split_profile
from onewell.errors import OnewellError

# `llama-bench -o json -m smollm2-135m-instruct-q4_1.gguf -p 8 -n 4 -t 1 -r 2`, build 11434 on this machine kind
LLAMA_BENCH_SAMPLE = r"""
[
  {
    "build_commit": "unknown",
    "build_number": 0,
    "cpu_info": "AMD EPYC",
    "gpu_info": "",
    "backends": "CPU",
    "model_filename": "/root/.cache/onewell/models/smollm2-135m-instruct-q4_1.gguf",
    "model_type": "llama 256M Q4_1",
    "model_size": 96576768,
    "model_n_params": 134515008,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 1,
    "cpu_mask": "0x0",
    "cpu_strict": false,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": -1,
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": false,
    "flash_attn": -1,
    "devices": "auto",
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "load_mode": "auto",
    "lazy_mode": "auto",
    "embeddings": false,
    "no_op_offload": 0,
    "no_host": false,
    "repack": true,
    "fit_target": 0,
    "fit_min_ctx": 0,
    "n_prompt": 8,
    "n_gen": 0,
    "n_depth": 0,
    "test_time": "2026-12-02T13:56:23Z",
    "avg_ns": 55752629,
    "stddev_ns": 10619426,
    "avg_ts": 146.142029,
    "stddev_ts": 27.836242,
    "samples_ns": [ 63261694, 48243565 ],
    "samples_ts": [ 126.459, 165.825 ]
  },
  {
    "build_commit": "unknown",
    "build_number": 0,
    "cpu_info": "AMD EPYC",
    "gpu_info": "",
    "backends": "CPU",
    "model_filename": "/root/.cache/onewell/models/smollm2-135m-instruct-q4_1.gguf",
    "model_type": "llama 256M Q4_1",
    "model_size": 96576768,
    "model_n_params": 134515008,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 1,
    "cpu_mask": "0x0",
    "cpu_strict": false,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": -1,
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": false,
    "flash_attn": -1,
    "devices": "auto",
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "load_mode": "auto",
    "lazy_mode": "auto",
    "embeddings": false,
    "no_op_offload": 0,
    "no_host": false,
    "repack": true,
    "fit_target": 0,
    "fit_min_ctx": 0,
    "n_prompt": 0,
    "n_gen": 4,
    "n_depth": 0,
    "test_time": "2026-12-02T13:56:23Z",
    "avg_ns": 28030266,
    "stddev_ns": 243001,
    "avg_ts": 142.708246,
    "stddev_ts": 1.236587,
    "samples_ns": [ 27858520, 28202013 ],
    "samples_ts": [ 143.583, 141.834 ]
  }
]
"""


# -- fakes ---------------------------------------------------------------------------------------------------

class FakeBackend:
    """Backend protocol without a model: records calls; the 'next token' is a fixed function of the last."""

    def __init__(self, n_vocab: int = 97, threads: int = 1):
        self.n_vocab, self.threads = n_vocab, threads
        self.n_ctx, self.n_past = 256, 0
        self.calls: list[tuple] = []
        self.closed = False

    def _next(self, token: int) -> int:
        return (token * 7 + 3) % self.n_vocab

    def reset(self):
        self.calls.append(("reset",))
        self.n_past = 0

    def truncate(self, n_past):
        self.n_past = n_past

    def forward(self, tokens, all_logits=False):
        tokens = list(tokens)
        assert all(0 <= t < self.n_vocab for t in tokens)
        self.calls.append(("forward", len(tokens)))
        self.n_past += len(tokens)
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        logits[self._next(tokens[-1])] = 1.0
        return logits

    def forward_argmax(self, tokens):
        self.calls.append(("argmax", list(tokens)))
        self.n_past += len(tokens)
        return self._next(tokens[-1])

    def close(self):
        self.closed = True


class ProfiledBackend(FakeBackend):
    """Adds the native backend's timers: a `profile` switch and profile_stats(reset) ->
    {category: seconds, "calls": forward steps, "tokens": tokens}, counting only while the switch is on."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.profile = False
        self.counted = 0

    def forward(self, tokens, all_logits=False):
        self.counted += len(tokens) if self.profile else 0
        return super().forward(tokens, all_logits)

    def forward_argmax(self, tokens):
        self.counted += len(tokens) if self.profile else 0
        return super().forward_argmax(tokens)

    def profile_stats(self, reset=False):
        n = self.counted
        if reset:
            self.counted = 0
        return {"embed": 0.0, "qkv_matmul": 0.009 * n, "attention": 0.001 * n, "idle": 0.0005 * n,
                "calls": n, "tokens": n}


def synthetic_run(noisy: bool = False, with_llamacpp: bool = True) -> RunResult:
    """Timings that follow Amdahl exactly (onewell tg: p = 0.3; pp: p = 0.9), bandwidth 40/50 GB/s."""
    run = RunResult()
    for t in (1, 2, 4):
        run.bandwidth[t] = {"median": 40.0 if t == 1 else 50.0, "min": 39.0, "max": 51.0}
        for rep in range(3):
            jitter = 1.0 + (0.2 * rep if noisy and t == 2 else 0.0)
            run.add("onewell", "pp16", t, 0.1 * (0.1 + 0.9 / t) * jitter)
            run.add("onewell", "tg8", t, 0.2 * (0.7 + 0.3 / t) * jitter)
            if with_llamacpp:
                run.add("llama.cpp", "pp16", t, 0.08 * (0.1 + 0.9 / t))
                run.add("llama.cpp", "tg8", t, 0.1 * (0.7 + 0.3 / t))
    run.profile = {"ops": {"matmul": 8e7, "rms_norm": 2e7}, "tokens": 8, "steps": 8, "wall_ns": 1.2e8}
    run.profile_threads = 4
    return run


MODEL = {"path": "/models/m.gguf", "name": "m", "arch": "llama", "file_type": "Q8_0", "file_bytes": 1_100_000_000,
         "weight_bytes_per_token": 1_000_000_000}
SETTINGS = {"backend": "native", "backend_class": "FakeBackend", "threads": [1, 2, 4], "tests": ["pp16", "tg8"],
            "reps": 3, "warmup": True, "seed": 0, "bandwidth_size_mb": 1024, "bandwidth_reps": 10}


def synthetic_report(**kw) -> dict:
    return build_report(synthetic_run(**kw), tests=make_tests([16], [8]), machine=machine.machine_info(),
                        model=MODEL, settings=SETTINGS, llamacpp={"binary": "/x/llama-bench"}, warnings=["a note"])


def result(report, engine, test, threads):
    (row,) = [r for r in report["results"] if (r["engine"], r["test"], r["threads"]) == (engine, test, threads)]
    return row


# -- Amdahl --------------------------------------------------------------------------------------------------

def test_amdahl_recovers_p_from_exact_timings():
    threads = [1, 2, 4, 8]
    fit = fit_amdahl(threads, [1.0 * ((1 - 0.7) + 0.7 / n) for n in threads])
    assert fit.p == pytest.approx(0.7, abs=1e-9)
    assert fit.t1 == pytest.approx(1.0, abs=1e-9)
    assert fit.serial_fraction == pytest.approx(0.3, abs=1e-9)
    assert fit.max_speedup == pytest.approx(1 / 0.3)
    assert fit.speedup(8) == pytest.approx(1 / (0.3 + 0.7 / 8))
    assert fit.rms_rel_residual < 1e-12 and not fit.underdetermined and fit.notes == []


def test_amdahl_fit_without_one_thread_and_with_noise():
    rng = np.random.default_rng(3)
    threads = [2, 3, 4, 6, 8] * 4  # repeated counts: every sample counts, t1 is extrapolated
    seconds = [2.5 * (0.45 + 0.55 / n) * rng.uniform(0.98, 1.02) for n in threads]
    fit = fit_amdahl(threads, seconds)
    assert fit.p == pytest.approx(0.55, abs=0.04)
    assert fit.t1 == pytest.approx(2.5, rel=0.05)
    assert 0 < fit.rms_rel_residual < 0.03
    assert fit.threads == (2, 3, 4, 6, 8)


def test_amdahl_refuses_one_thread_count():
    with pytest.raises(UnderdeterminedFitError, match="one thread count"):
        fit_amdahl([4], [1.0])
    with pytest.raises(UnderdeterminedFitError):
        fit_amdahl([2, 2, 2], [1.0, 1.1, 0.9])  # repetitions of one count are still one point


def test_amdahl_two_counts_are_exact_but_flagged_underdetermined():
    fit = fit_amdahl([1, 2], [1.0, 0.65])
    assert fit.underdetermined
    assert fit.p == pytest.approx(0.7)
    assert any("underdetermined" in n for n in fit.notes)


def test_amdahl_flags_data_outside_the_law_and_rejects_bad_input():
    faster = fit_amdahl([1, 2, 4], [1.0, 0.4, 0.2])  # superlinear
    assert faster.p > 1 and any("more than linearly" in n for n in faster.notes)
    slower = fit_amdahl([1, 2, 4], [1.0, 1.2, 1.5])  # threads hurt
    assert slower.p < 0 and any("slower" in n for n in slower.notes)
    with pytest.raises(ValueError):
        fit_amdahl([1, 2], [1.0, -1.0])
    with pytest.raises(ValueError):
        fit_amdahl([0, 2], [1.0, 0.5])
    with pytest.raises(ValueError):
        fit_amdahl([1, 2, 4], [1.0, 0.5])


def test_next_thread_counts():
    assert next_thread_counts((1, 2)) == [4, 8]
    assert next_thread_counts((1, 2, 4, 6)) == [8, 16]


# -- machine -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cores, expected", [(1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])])
def test_default_thread_counts(cores, expected):
    assert machine.default_thread_counts(cores) == expected


def test_cpu_ranges_and_machine_info():
    assert machine.cpu_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert machine.cpu_ranges([3]) == "3"
    info = machine.machine_info()
    assert info["allowed_cpus"] and set(info["allowed_cpus"]) <= set(range(info["logical_cpus"]))
    assert 1 <= info["allowed_physical_cores"] <= info["physical_cores"] <= info["logical_cpus"]
    from onewell._native import _core
    assert info["isa"] == _core.cpu_features()["isa"]
    note = machine.placement_note(info, [1, info["logical_cpus"] + 1])
    assert "oversubscribe" in note and machine.cpu_ranges(info["allowed_cpus"]) in note


@pytest.mark.parametrize("isa", ["generic", "avx2", "avxvnni", "avx512"])
def test_isa_cap_runs_that_level_or_refuses(isa, monkeypatch):
    from onewell._native import _core
    monkeypatch.setenv("ONEWELL_ISA", "")   # restored after the test: set_isa_cap writes os.environ
    levels = {"generic": {"generic"}, "avx2": {"avx2"}, "avxvnni": {"avx2-vnni"}, "avx512": {"avx512"}}
    if levels[isa] & (set(_core.kernel_paths()) | {"generic"}):
        bench.set_isa_cap(isa)
        assert _core.cpu_features()["isa"] == isa and os.environ["ONEWELL_ISA"] == isa
    else:   # a level this CPU lacks would silently measure another one
        with pytest.raises(OnewellError, match=f"--isa {isa}: this CPU has no such level"):
            bench.set_isa_cap(isa)


# -- runner --------------------------------------------------------------------------------------------------

def test_test_names_and_sizes():
    assert [t.name for t in make_tests([128, 0], [32])] == ["pp128", "tg32"]
    assert BenchTest.parse("tg32") == BenchTest("tg", 32)
    with pytest.raises(ValueError):
        BenchTest.parse("xx12")
    with pytest.raises(ValueError):
        make_tests([0], [0])


def test_depth_test_names_as_llama_bench_rows_get_them():
    tests = make_tests([128], [32], depths=[4096, 0])
    assert [t.name for t in tests] == ["pp128", "tg32", "pp128@d4096", "tg32@d4096"]
    assert BenchTest.parse("tg32@d4096") == BenchTest("tg", 32, 4096)
    assert llamacpp._test_name({"n_gen": 32, "n_depth": 4096}) == "tg32@d4096"
    for bad in ("tg32@d", "tg32@d0", "tg32@dx"):
        with pytest.raises(ValueError):
            BenchTest.parse(bad)
    from onewell.bench.runner import context_needed
    assert context_needed(make_tests([0], [32])) == 33                     # the 1-token prompt, then 32
    assert context_needed(make_tests([128], [32], depths=[4096])) == 4096 + 128


def test_timer_at_depth_evaluates_the_context_once_and_truncates_back_to_it():
    backend = FakeBackend(n_vocab=97)
    backend.n_ctx = 1024
    timer = EngineTimer(backend, backend.n_vocab)
    timer.run(BenchTest("tg", 5, depth=300))
    assert backend.calls[:2] == [("reset",), ("forward", 300)]          # the context, untimed
    steps = [c for c in backend.calls[2:]]
    assert len(steps) == 5 and all(c[0] == "argmax" for c in steps)
    assert backend.n_past == 305
    backend.calls.clear()
    timer.run(BenchTest("tg", 5, depth=300))                           # a repetition: no second context
    assert backend.calls[0][0] == "argmax" and len(backend.calls) == 5 and backend.n_past == 305
    backend.calls.clear()
    timer.run(BenchTest("pp", 8, depth=300))
    assert backend.calls == [("forward", 8)] and backend.n_past == 308
    backend.calls.clear()
    timer.run(BenchTest("tg", 2, depth=100))                           # another depth: a new context
    assert backend.calls[:2] == [("reset",), ("forward", 100)]
    timer.run(BenchTest("pp", 200))                                     # depth 0 overwrites the context ...
    backend.calls.clear()
    timer.run(BenchTest("tg", 2, depth=100))                           # ... though the cache holds >= 100
    assert backend.calls[:2] == [("reset",), ("forward", 100)]


def test_tg_at_depth_counts_the_kv_cache_it_reads():
    run = RunResult()
    for rep in range(2):
        run.add("onewell", "tg8@d1000", 1, 0.1)
        run.add("onewell", "tg8", 1, 0.1)
    run.bandwidth[1] = {"median": 40.0, "min": 39.0, "max": 41.0}
    model = dict(MODEL, kv_bytes_per_token=24_576)
    report = build_report(run, tests=make_tests([0], [8], depths=[0, 1000]), machine=machine.machine_info(),
                          model=model, settings=dict(SETTINGS, tests=["tg8", "tg8@d1000"], kv_type="f16",
                                                     depths=[0, 1000], kv_bytes=24_576 * 1024))
    jsonschema.validate(report, SCHEMA)
    deep, flat = result(report, "onewell", "tg8@d1000", 1), result(report, "onewell", "tg8", 1)
    assert flat["bytes_per_token"] == 1e9 and flat["depth"] == 0
    assert deep["depth"] == 1000 and deep["bytes_per_token"] == pytest.approx(1e9 + 24_576 * 1004.5)
    assert deep["ceiling_tok_s"] == pytest.approx(40e9 / deep["bytes_per_token"])
    assert "KV cache f16 25.2 MB, 24.6 kB/token" in render_report(report)


def test_timer_pp_is_one_forward_from_an_empty_cache():
    backend = FakeBackend()
    seconds = EngineTimer(backend, backend.n_vocab).run(BenchTest("pp", 12))
    assert seconds > 0
    assert backend.calls == [("reset",), ("forward", 12)]


def test_timer_tg_feeds_back_greedy_tokens():
    backend = FakeBackend()
    EngineTimer(backend, backend.n_vocab).run(BenchTest("tg", 5))
    assert backend.calls[:2] == [("reset",), ("forward", 1)]
    steps = [c[1] for c in backend.calls[2:]]
    assert len(steps) == 5 and all(len(s) == 1 for s in steps)
    for prev, cur in zip(steps, steps[1:]):
        assert cur[0] == backend._next(prev[0])  # each step is fed the previous argmax


def test_run_benchmark_order_interleaving_and_cleanup():
    events: list[tuple] = []
    backends: list[FakeBackend] = []

    def make(t):
        events.append(("backend", t))
        backends.append(FakeBackend(threads=t))
        return backends[-1]

    def bandwidth(t):
        events.append(("bandwidth", t))
        return {"median": 10.0 * t, "min": 9.0, "max": 11.0}

    def other(t):
        events.append(("other", t))
        return {"pp4": 0.5, "tg3": 0.25}

    tests = make_tests([4], [3])
    run = run_benchmark(make, 97, tests, [1, 2], reps=3, bandwidth=bandwidth, other=other)
    assert events == [("bandwidth", 1), ("backend", 1), ("other", 1), ("other", 1), ("other", 1),
                      ("bandwidth", 2), ("backend", 2), ("other", 2), ("other", 2), ("other", 2)]
    assert all(b.closed for b in backends)
    for engine in ("onewell", "llama.cpp"):
        for name in ("pp4", "tg3"):
            for t in (1, 2):
                assert len(run.seconds[(engine, name, t)]) == 3
    assert run.bandwidth == {1: {"median": 10.0, "min": 9.0, "max": 11.0}, 2: {"median": 20.0, "min": 9.0, "max": 11.0}}
    # warm-up ran a full pp and one tg token before the first timed repetition
    assert backends[0].calls[:2] == [("reset",), ("forward", 4)]
    assert run.profile is None


def test_run_benchmark_profiles_tokens_with_native_timers():
    backends = []
    run = run_benchmark(lambda t: backends.append(ProfiledBackend(threads=t)) or backends[-1], 97,
                        make_tests([8], [4]), [1, 2], reps=1, profile_threads=2, profile_n_tokens=6)
    assert run.profile_threads == 2
    # only the 6 profiled steps are counted: not the timed runs, not the prompt before the steps
    assert run.profile["tokens"] == 6 and run.profile["steps"] == 6
    assert run.profile["ops"] == pytest.approx({"qkv_matmul": 0.054e9, "attention": 0.006e9, "idle": 0.003e9})
    assert run.profile["wall_ns"] > 0
    assert backends[1].profile is False and backends[0].counted == 0  # switched off again; 1 thread not profiled
    # a backend without timers yields no profile rather than a made-up one
    run = run_benchmark(lambda t: FakeBackend(), 97, make_tests([0], [2]), [1], reps=1, profile_threads=1)
    assert run.profile is None and run.profile_threads is None


def test_split_profile_reads_the_native_form():
    raw = {"embed": 0.0, "down_matmul": 0.002, "idle": 0.0005, "calls": 3, "tokens": 3}
    assert split_profile(raw) == {"ops": {"down_matmul": 2e6, "idle": 5e5}, "tokens": 3, "steps": 3}


# -- report: JSON, numbers, table ------------------------------------------------------------------------------

def test_report_validates_against_the_schema():
    report = synthetic_report()
    jsonschema.validate(report, SCHEMA)
    jsonschema.validate(json.loads(json.dumps(report)), SCHEMA)  # survives a JSON round trip
    assert report["schema_version"] == SCHEMA_VERSION
    broken = json.loads(json.dumps(report))
    broken["results"][0]["engine"] = "other"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_report_numbers_follow_the_definitions():
    report = synthetic_report()
    tg1 = result(report, "onewell", "tg8", 1)
    assert tg1["tok_s"]["median"] == pytest.approx(8 / 0.2)
    assert tg1["bytes_per_token"] == 1e9
    assert tg1["achieved_gbps"] == pytest.approx(40.0)          # 1 GB/token x 40 tok/s
    assert tg1["utilization"] == pytest.approx(40.0 / 40.0)
    assert tg1["ceiling_tok_s"] == pytest.approx(40.0)          # 40 GB/s / 1 GB per token
    tg4 = result(report, "onewell", "tg8", 4)
    assert tg4["speedup_vs_1t"] == pytest.approx(1 / (0.7 + 0.3 / 4))
    pp1 = result(report, "onewell", "pp16", 1)
    assert pp1["bytes_per_token"] == pytest.approx(1e9 / 16) and pp1["ceiling_tok_s"] is None


def test_pp_bytes_count_one_weight_pass_per_batch_chunk():
    run = synthetic_run()
    report = build_report(run, tests=make_tests([16], [8]), machine=machine.machine_info(), model=MODEL,
                          settings=dict(SETTINGS, max_batch=6), llamacpp={"binary": "b", "n_ubatch": 512})
    jsonschema.validate(report, SCHEMA)
    assert result(report, "onewell", "pp16", 1)["bytes_per_token"] == pytest.approx(3 * 1e9 / 16)  # 6 + 6 + 4
    assert result(report, "llama.cpp", "pp16", 1)["bytes_per_token"] == pytest.approx(1e9 / 16)
    assert result(report, "onewell", "tg8", 1)["bytes_per_token"] == 1e9
    fits = {(s["engine"], s["test"]): s for s in report["scaling"]}
    assert fits[("onewell", "tg8")]["status"] == "fit"
    assert fits[("onewell", "tg8")]["p"] == pytest.approx(0.3)
    assert fits[("onewell", "pp16")]["p"] == pytest.approx(0.9)
    assert fits[("llama.cpp", "tg8")]["max_speedup"] == pytest.approx(1 / 0.7)
    comparison = {(c["test"], c["threads"]): c for c in report["comparison"]}
    assert comparison[("tg8", 1)]["ratio"] == pytest.approx(0.1 / 0.2)
    assert comparison[("tg8", 1)]["pair_ratios"] == pytest.approx([0.5] * 3)
    prof = report["profile"]
    assert [o["op"] for o in prof["ops"]] == ["matmul", "rms_norm"]
    assert prof["ops"][0]["ms_per_token"] == pytest.approx(10.0) and prof["ops"][0]["share"] == pytest.approx(0.8)
    assert prof["wall_ms_per_token"] == pytest.approx(15.0)
    assert not any(r["noisy"] for r in report["results"])


def test_noisy_repetitions_are_flagged():
    report = synthetic_report(noisy=True)
    row = result(report, "onewell", "tg8", 2)
    assert row["noisy"] and row["spread_pct"] > 10
    assert not result(report, "onewell", "tg8", 1)["noisy"]
    assert any("onewell tg8 at 2 thread(s): repetitions disagree" in w for w in report["warnings"])
    assert "! |" in render_report(report) or "% ! " in render_report(report)


def test_one_thread_count_reports_a_refused_fit():
    run = RunResult()
    run.add("onewell", "tg8", 2, 0.5)
    report = build_report(run, tests=make_tests([0], [8]), machine=machine.machine_info(), model=MODEL,
                          settings=dict(SETTINGS, threads=[2], tests=["tg8"]))
    jsonschema.validate(report, SCHEMA)
    (fit,) = report["scaling"]
    assert fit["status"] == "refused" and fit["p"] is None
    assert result(report, "onewell", "tg8", 2)["utilization"] is None  # no bandwidth measured
    text = render_report(report)
    assert "no fit" in text and "not measured" in text and "not available" in text


def test_scaling_outside_amdahls_range_gets_no_ceiling():
    run = RunResult()
    for t, secs in ((1, 1.0), (2, 1.3), (4, 1.6)):  # more threads, slower
        run.add("onewell", "tg8", t, secs)
    report = build_report(run, tests=make_tests([0], [8]), machine=machine.machine_info(), model=MODEL,
                          settings=dict(SETTINGS, tests=["tg8"]))
    jsonschema.validate(report, SCHEMA)
    (fit,) = report["scaling"]
    assert fit["status"] == "fit" and fit["p"] < 0
    assert fit["max_speedup"] is None and fit["predicted"] == []
    assert "outside 0..1: no ceiling or prediction" in render_report(report)


def test_table_renders_every_cell():
    report = synthetic_report()
    text = render_report(report)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| engine"))
    for column in ("tok/s", "min-max", "x1t", "MB/tok", "GB/s", "read BW", "util", "ceiling tok/s"):
        assert column in header
    rows = [line for line in lines if line.startswith("| onewell") or line.startswith("| llama.cpp")]
    assert len(rows) == len(report["results"]) == 12
    assert "| onewell   | tg8  |       1 |  40.00 |   40.0-40.0 |     0% | 1.00 | 1000.0 |  40.0 |    40.0 | 100% |" \
        in text
    assert "100%" in text  # utilization of the 1-thread tg row
    assert "onewell vs llama.cpp" in text and "0.50" in text
    assert "p = 0.30 parallel" in text
    assert "matmul" in text and "warning: a note" in text
    assert "utilization above 100% (llama.cpp tg8, onewell tg8)" in text  # impossible: the probe understated
    cpu = report["machine"]["cpu_model"]
    assert cpu in text and f"ISA {report['machine']['isa']}" in text


# -- plot ------------------------------------------------------------------------------------------------------

def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from onewell.bench.plot import write_plot

    out = tmp_path / "bench.png"
    write_plot(synthetic_report(), out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    # and without a comparison, profile or bandwidth
    run = RunResult()
    run.add("onewell", "tg8", 1, 0.5)
    report = build_report(run, tests=make_tests([0], [8]), machine=machine.machine_info(), model=MODEL,
                          settings=dict(SETTINGS, threads=[1], tests=["tg8"]))
    write_plot(report, tmp_path / "small.png")
    assert (tmp_path / "small.png").read_bytes()[:4] == b"\x89PNG"


# -- llama-bench -----------------------------------------------------------------------------------------------

def test_parse_llama_bench_json_sample():
    rows = llamacpp.parse_llama_bench_json(LLAMA_BENCH_SAMPLE)
    assert [r.test for r in rows] == ["pp8", "tg4"]
    pp, tg = rows
    assert pp.n_threads == 1 and pp.samples_ns == (63261694, 48243565)
    assert pp.seconds == pytest.approx([0.063261694, 0.048243565])
    assert pp.avg_ts == pytest.approx(146.142029)
    assert tg.model_size == 96576768 and tg.model_type == "llama 256M Q4_1" and tg.cpu_info == "AMD EPYC"
    assert tg.n_ubatch == 512 and llamacpp.version_info(rows, Path("/b"))["n_ubatch"] == 512
    # 4 tokens / mean of the samples agrees with llama-bench's own average
    assert 4 / np.mean(tg.seconds) == pytest.approx(tg.avg_ts, rel=0.01)
    # stray text around the array is tolerated; garbage is a clear error
    assert len(llamacpp.parse_llama_bench_json("log line\n" + LLAMA_BENCH_SAMPLE + "\nbye")) == 2
    with pytest.raises(llamacpp.LlamaBenchError):
        llamacpp.parse_llama_bench_json("not json")
    with pytest.raises(llamacpp.LlamaBenchError, match="entry 0"):
        llamacpp.parse_llama_bench_json('[{"n_threads": 1}]')


def test_llama_bench_depth_and_combined_test_names():
    entry = json.loads(LLAMA_BENCH_SAMPLE)[1]
    rows = llamacpp.parse_llama_bench_json(json.dumps([dict(entry, n_prompt=16, n_depth=512)]))
    assert rows[0].test == "pp16+tg4@d512"


def test_vs_option_and_finding_llama_bench(tmp_path, monkeypatch):
    assert llamacpp.parse_vs("llama.cpp") is None
    assert llamacpp.parse_vs("llama.cpp=/opt/bin/llama-bench") == "/opt/bin/llama-bench"
    for bad in ("vllm", "llama.cpp="):
        with pytest.raises(llamacpp.LlamaBenchError):
            llamacpp.parse_vs(bad)
    exe = tmp_path / "llama-bench"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    assert llamacpp.find_llama_bench(str(exe)) == exe
    assert llamacpp.find_llama_bench(str(tmp_path)) == exe  # the folder holding it
    monkeypatch.setenv("LLAMA_BENCH", str(exe))
    assert llamacpp.find_llama_bench(None) == exe
    monkeypatch.delenv("LLAMA_BENCH")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(llamacpp.LlamaBenchError, match="not found"):
        llamacpp.find_llama_bench(None)
    with pytest.raises(llamacpp.LlamaBenchError):
        llamacpp.find_llama_bench(str(tmp_path / "missing"))


def test_llama_bench_command_flags():
    cmd = llamacpp.llama_bench_command(Path("/b/llama-bench"), Path("/m.gguf"), 2, [128], [], reps=1)
    assert cmd == ["/b/llama-bench", "-o", "json", "-m", "/m.gguf", "-p", "128", "-n", "0", "-t", "2", "-r", "1"]
    cmd = llamacpp.llama_bench_command(Path("/b/llama-bench"), Path("/m.gguf"), 2, [], [32], reps=1,
                                       depths=[4096, 0], kv_type="q8_0")
    assert cmd[-6:] == ["-d", "0,4096", "-ctk", "q8_0", "-ctv", "q8_0"]
    # llama-bench 11434 refuses `-ctk f32` ("invalid parameter"): an f32 run compares with its default f16
    assert llamacpp.llama_bench_kv_type("f32") is None and llamacpp.llama_bench_kv_type("q8_0") == "q8_0"
    with pytest.raises(llamacpp.LlamaBenchError, match="no 'f32' KV cache"):
        llamacpp.llama_bench_command(Path("/b/llama-bench"), Path("/m.gguf"), 2, [], [32], kv_type="f32")


def test_llama_bench_side_asks_for_the_depths_and_cache_type(tmp_path):
    side = bench.LlamaBenchSide(fake_llama_bench(tmp_path), Path("/m.gguf"), make_tests([0], [4], depths=[0, 64]),
                                kv_type="f16")
    assert side(2) == {"tg4": 0.004, "tg4@d64": 0.004064}


FAKE_LLAMA_BENCH = """#!{python}
# answers like `llama-bench -o json`: one entry per requested test at the requested thread count
import json, sys
args = sys.argv[1:]
get = lambda flag: args[args.index(flag) + 1]
threads = int(get("-t"))
depths = list(map(int, get("-d").split(","))) if "-d" in args else [0]
out = []
for flag, key in (("-p", "n_prompt"), ("-n", "n_gen")):
    for n in map(int, get(flag).split(",")):
        for d in depths:
            if n:
                entry = {{"build_commit": "fake", "build_number": 1, "cpu_info": "cpu", "backends": "CPU",
                          "model_type": "fake", "model_size": 1, "n_threads": threads, "n_prompt": 0, "n_gen": 0,
                          "n_depth": d, "avg_ts": 1000.0, "samples_ns": [n * 1000000 + d * 1000]}}
                entry[key] = n
                out.append(entry)
print(json.dumps(out))
"""


def fake_llama_bench(tmp_path) -> Path:
    exe = tmp_path / "llama-bench"
    exe.write_text(FAKE_LLAMA_BENCH.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def test_llama_bench_errors_are_clear(tmp_path):
    exe = tmp_path / "llama-bench"
    exe.write_text("#!/bin/sh\necho 'error: model not found' >&2\nexit 3\n")
    exe.chmod(0o755)
    with pytest.raises(llamacpp.LlamaBenchError, match="(?s)exited with 3.*model not found"):
        llamacpp.run_llama_bench(exe, Path("/m.gguf"), 1, [8], [4])
    rows = llamacpp.run_llama_bench(fake_llama_bench(tmp_path), Path("/m.gguf"), 2, [8], [4])
    assert [(r.test, r.n_threads, r.seconds) for r in rows] == [("pp8", 2, [0.008]), ("tg4", 2, [0.004])]


# -- the command -----------------------------------------------------------------------------------------------

def test_thread_list_parsing():
    parser = bench.build_parser()
    assert parser.parse_args(["m", "-t", "1-2,8"]).threads == [1, 2, 8]
    assert parser.parse_args(["m", "-p", "0", "-n", "16,4"]).n_gen == [4, 16]
    for bad in ("0", "x", "4-2"):
        with pytest.raises(SystemExit):
            parser.parse_args(["m", "-t", bad])
    args = parser.parse_args(["m", "-d", "0,4096", "--kv-type", "q8_0"])
    assert args.n_depth == [0, 4096] and args.kv_type == "q8_0"
    assert parser.parse_args(["m"]).n_depth == [0] and parser.parse_args(["m"]).kv_type == "f16"
    with pytest.raises(SystemExit):
        parser.parse_args(["m", "--kv-type", "q4_0"])


def test_bad_options_fail_before_measuring(tmp_path):
    with pytest.raises(llamacpp.LlamaBenchError):
        bench.main(["/nonexistent.gguf", "--vs", "vllm"])
    for option in ("--json", "--plot"):
        with pytest.raises(OnewellError, match="folder does not exist"):
            bench.main(["/nonexistent.gguf", option, str(tmp_path / "missing" / "out")])


@pytest.mark.model
def test_bench_command_json_and_plot(smollm_path, tmp_path, capsys):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    code = bench.main([str(smollm_path), "-t", "1", "-p", "8", "-n", "4", "-r", "2", "--no-profile",
                       "--no-bandwidth", "--json", str(out_json), "--plot", str(out_png), "-q"])
    assert code == 0
    report = json.loads(out_json.read_text())
    jsonschema.validate(report, SCHEMA)
    assert {(r["engine"], r["test"], r["threads"]) for r in report["results"]} == {
        ("onewell", "pp8", 1), ("onewell", "tg4", 1)}
    assert all(len(r["samples_s"]) == 2 for r in report["results"])
    assert report["model"]["weight_bytes_per_token"] == 96576768  # llama-bench's model_size for this file
    assert report["comparison"] == [] and report["llamacpp"] is None and report["profile"] is None
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "| onewell | pp8  |       1 |" in table and "| onewell | tg4  |       1 |" in table


@pytest.mark.model
def test_bench_command_native_backend_profiles_a_token(smollm_path, tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    assert bench.main([str(smollm_path), "-t", "1", "-p", "8", "-n", "4", "-r", "1", "--no-bandwidth",
                       "--json", str(out_json), "-q"]) == 0
    report = json.loads(out_json.read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["settings"]["backend_class"] == "NativeBackend"
    prof = report["profile"]
    assert prof["threads"] == 1 and prof["tokens"] == 4
    ops = {o["op"] for o in prof["ops"]}
    assert {"qkv_matmul", "down_matmul", "output_matmul", "attention"} <= ops
    assert sum(o["share"] for o in prof["ops"]) == pytest.approx(1.0)
    assert 0 < prof["timed_ms_per_token"] <= prof["wall_ms_per_token"] * 1.05  # C timers inside Python's clock
    assert "one generated token by op" in capsys.readouterr().out


@pytest.mark.model
def test_bench_command_vs_llamacpp_with_bandwidth(smollm_path, tmp_path, capsys):
    exe = fake_llama_bench(tmp_path)
    code = bench.main([str(smollm_path), "-t", "1", "-p", "8", "-n", "4", "-r", "2", "--bandwidth-size-mb", "8", "--bandwidth-reps", "1", "--vs", f"llama.cpp={exe}", "--json"])
    assert code == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # --json without a file: JSON on stdout, the table on stderr
    jsonschema.validate(report, SCHEMA)
    assert "onewell vs llama.cpp" in captured.err
    theirs = result(report, "llama.cpp", "tg4", 1)
    assert theirs["samples_s"] == pytest.approx([0.004, 0.004])  # one llama-bench run per repetition
    (bw,) = report["bandwidth"]
    assert bw["threads"] == 1 and bw["median_gbps"] > 0
    ours = result(report, "onewell", "tg4", 1)
    assert ours["utilization"] == pytest.approx(ours["achieved_gbps"] / bw["median_gbps"])
    assert {(c["test"], c["threads"]) for c in report["comparison"]} == {("pp8", 1), ("tg4", 1)}
    assert report["llamacpp"]["binary"] == str(exe) and report["llamacpp"]["build_commit"] == "fake"
    assert any("under 4x the last-level cache" in w for w in report["warnings"])


@pytest.mark.model
def test_bench_command_at_depth_against_llama_bench(smollm_path, tmp_path):
    out_json = tmp_path / "bench.json"
    assert bench.main([str(smollm_path), "-t", "1", "-p", "0", "-n", "4", "-d", "0,16", "-r", "1", "--no-profile",
                       "--no-bandwidth", "--kv-type", "q8_0", "--vs", f"llama.cpp={fake_llama_bench(tmp_path)}",
                       "--json", str(out_json), "-q"]) == 0
    report = json.loads(out_json.read_text())
    jsonschema.validate(report, SCHEMA)
    assert {(r["engine"], r["test"]) for r in report["results"]} == {
        (e, t) for e in ("onewell", "llama.cpp") for t in ("tg4", "tg4@d16")}
    assert {c["test"] for c in report["comparison"]} == {"tg4", "tg4@d16"}
    s = report["settings"]
    assert s["kv_type"] == "q8_0" and s["depths"] == [0, 16]
    assert report["model"]["kv_bytes_per_token"] == 30 * 2 * 3 * 64 // 32 * 34   # SmolLM2: 30 layers, 3 kv heads
