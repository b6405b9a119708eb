"""The bench report: raw timings -> one JSON document (schema below) -> the terminal table.

The JSON is the single source: the table and the plot are drawn from it, so what is printed is what is saved.
Definitions (docs/benchmarking.md explains them):
  bytes per token   weight bytes read per token: tg = every weight but the embedding gather
                    (ModelSpec.bytes_per_token), plus at depth D the KV cache it attends to (D + (N+1)/2 positions
                    of model.kv_bytes_per_token); pp = the weights once per batch chunk of the engine (onewell's
                    max_batch, llama.cpp's n_ubatch), divided by the prompt length
  achieved GB/s     bytes per token x tok/s (median)
  utilization       achieved GB/s / read bandwidth measured in the same run at the same thread count
  ceiling tok/s     read bandwidth / bytes per token: the tg speed if every byte it reads came at that bandwidth
"""
from __future__ import annotations

import datetime as _dt
import math
import textwrap
from typing import Sequence

import numpy as np

from onewell.bench.amdahl import UnderdeterminedFitError, fit_amdahl, next_thread_counts
from onewell.bench.machine import placement_note
from onewell.bench.runner import BenchTest, RunResult

SCHEMA_VERSION = 1
NOISE_LIMIT_PCT = 10.0  # repetitions whose min..max spans more than this (of the median) get a warning
ENGINES = ("onewell", "llama.cpp")

_num = {"type": "number"}
_num_or_null = {"type": ["number", "null"]}
_int_or_null = {"type": ["integer", "null"]}
_str_or_null = {"type": ["string", "null"]}
_stats = {
    "type": "object",
    "required": ["median", "min", "max", "q1", "q3"],
    "properties": {k: _num for k in ("median", "min", "max", "q1", "q3")},
    "additionalProperties": False,
}

SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "onewell bench report",
    "type": "object",
    "required": ["schema_version", "created", "machine", "model", "settings", "bandwidth", "results", "scaling",
                 "comparison", "profile", "llamacpp", "warnings"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "created": {"type": "string", "description": "UTC time the run ended, ISO 8601"},
        "machine": {
            "type": "object",
            "required": ["cpu_model", "logical_cpus", "physical_cores", "allowed_cpus", "allowed_physical_cores",
                         "isa", "kernel_path", "cpu_features", "os", "python", "onewell_version"],
            "properties": {
                "cpu_model": {"type": "string"},
                "logical_cpus": {"type": "integer", "minimum": 1},
                "physical_cores": {"type": "integer", "minimum": 1},
                "allowed_cpus": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                "allowed_physical_cores": {"type": "integer", "minimum": 1},
                "numa_nodes": _int_or_null,
                "last_level_cache_bytes": _int_or_null,
                "virtualized": {"type": ["boolean", "null"]},
                "governor": _str_or_null,
                "load_average": {"type": ["array", "null"], "items": _num},
                "isa": _str_or_null,
                "kernel_path": _str_or_null,
                "isa_override": _str_or_null,
                "cpu_id": _str_or_null,
                "decode_prefetch_bytes": _int_or_null,
                "wide_tiles": {"type": ["boolean", "null"]},
                "float_gemm": {"type": ["boolean", "null"]},
                "gemm_overlap": {"type": ["boolean", "null"]},
                "rows_gemm": {"type": ["boolean", "null"]},
                "cpu_features": {"type": "object", "additionalProperties": {"type": "boolean"}},
                "os": {"type": "string"},
                "python": {"type": "string"},
                "onewell_version": {"type": "string"},
            },
        },
        "model": {
            "type": "object",
            "required": ["path", "arch", "file_bytes", "weight_bytes_per_token"],
            "properties": {
                "path": {"type": "string"},
                "name": _str_or_null,
                "arch": {"type": "string"},
                "file_type": _str_or_null,
                "file_bytes": {"type": "integer", "minimum": 0},
                "weight_bytes_per_token": {"type": "integer", "minimum": 1},
            },
        },
        "settings": {
            "type": "object",
            "required": ["backend", "backend_class", "threads", "tests", "reps", "warmup", "seed",
                         "bandwidth_size_mb", "bandwidth_reps"],
            "properties": {
                "backend": {"enum": ["native", "reference"]},
                "backend_class": {"type": "string", "description": "the class that ran (shows a fallback)"},
                "threads": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1},
                "tests": {"type": "array", "items": {"type": "string", "pattern": "^(pp|tg)[0-9]+(@d[0-9]+)?$"}},
                "reps": {"type": "integer", "minimum": 1},
                "warmup": {"type": "boolean"},
                "seed": {"type": "integer"},
                "bandwidth_size_mb": _int_or_null,
                "bandwidth_reps": _int_or_null,
                "max_batch": {"type": ["integer", "null"], "minimum": 1,
                              "description": "prompt tokens per forward chunk of the onewell backend (null: one)"},
                "kv_type": {"enum": ["f32", "f16", "q8_0"], "description": "KV cache element type (both engines)"},
                "depths": {"type": "array", "items": {"type": "integer", "minimum": 0},
                           "description": "context tokens before the tests (llama-bench -d)"},
                "kv_bytes": {"type": "integer", "minimum": 0,
                             "description": "KV cache the onewell backend reserved for the longest test"},
            },
        },
        "bandwidth": {
            "type": "array",
            "description": "read bandwidth (GB/s, 1e9 B) at each thread count, measured in this run",
            "items": {
                "type": "object",
                "required": ["threads", "kind", "median_gbps", "min_gbps", "max_gbps"],
                "properties": {"threads": {"type": "integer", "minimum": 1}, "kind": {"const": "read"},
                               "median_gbps": _num, "min_gbps": _num, "max_gbps": _num},
            },
        },
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["engine", "test", "kind", "n_tokens", "threads", "samples_s", "tok_s", "spread_pct",
                             "noisy", "bytes_per_token", "achieved_gbps", "read_bandwidth_gbps", "utilization",
                             "ceiling_tok_s", "speedup_vs_1t"],
                "additionalProperties": False,
                "properties": {
                    "engine": {"enum": list(ENGINES)},
                    "test": {"type": "string", "pattern": "^(pp|tg)[0-9]+(@d[0-9]+)?$"},
                    "depth": {"type": "integer", "minimum": 0, "description": "context tokens before the test"},
                    "kind": {"enum": ["pp", "tg"]},
                    "n_tokens": {"type": "integer", "minimum": 1},
                    "threads": {"type": "integer", "minimum": 1},
                    "samples_s": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0},
                                  "minItems": 1, "description": "seconds of each repetition, in run order"},
                    "tok_s": _stats,
                    "spread_pct": {"type": "number", "minimum": 0, "description": "(max - min) / median tok/s"},
                    "noisy": {"type": "boolean", "description": f"spread_pct > {NOISE_LIMIT_PCT:g}"},
                    "bytes_per_token": {"type": "number", "exclusiveMinimum": 0},
                    "achieved_gbps": _num,
                    "read_bandwidth_gbps": _num_or_null,
                    "utilization": {"type": ["number", "null"], "description": "fraction, not percent"},
                    "ceiling_tok_s": _num_or_null,
                    "speedup_vs_1t": _num_or_null,
                },
            },
        },
        "scaling": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["engine", "test", "threads", "status", "p", "serial_fraction", "t1_s",
                             "max_speedup", "rms_rel_residual", "predicted", "notes"],
                "properties": {
                    "engine": {"enum": list(ENGINES)},
                    "test": {"type": "string"},
                    "threads": {"type": "array", "items": {"type": "integer"}},
                    "status": {"enum": ["fit", "underdetermined", "refused"]},
                    "p": _num_or_null,
                    "serial_fraction": _num_or_null,
                    "t1_s": _num_or_null,
                    "max_speedup": {"type": ["number", "string", "null"], "description": "'inf' when p >= 1"},
                    "rms_rel_residual": _num_or_null,
                    "predicted": {"type": "array", "items": {
                        "type": "object", "required": ["threads", "speedup", "tok_s"],
                        "properties": {"threads": {"type": "integer"}, "speedup": _num, "tok_s": _num}}},
                    "notes": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "comparison": {
            "type": "array",
            "description": "onewell / llama.cpp tok/s per test and thread count",
            "items": {
                "type": "object",
                "required": ["test", "threads", "onewell_tok_s", "llamacpp_tok_s", "ratio", "pair_ratios"],
                "properties": {
                    "test": {"type": "string"}, "threads": {"type": "integer"},
                    "onewell_tok_s": _num, "llamacpp_tok_s": _num,
                    "ratio": {"type": "number", "description": "onewell median / llama.cpp median"},
                    "pair_ratios": {"type": "array", "items": _num,
                                    "description": "onewell / llama.cpp of each interleaved repetition pair"},
                },
            },
        },
        "profile": {
            "type": ["object", "null"],
            "description": "one generated token by op category, from the native timers (null: no timers)",
            "required": ["threads", "tokens", "steps", "wall_ms_per_token", "timed_ms_per_token", "ops"],
            "properties": {
                "threads": {"type": "integer", "minimum": 1},
                "tokens": {"type": "integer", "minimum": 1},
                "steps": {"type": "integer", "minimum": 0, "description": "forward calls the tokens took"},
                "wall_ms_per_token": {"type": "number", "description": "Python's clock around the steps"},
                "timed_ms_per_token": {"type": "number", "description": "sum of the categories"},
                "ops": {"type": "array", "items": {
                    "type": "object", "required": ["op", "ms_per_token", "share"],
                    "properties": {"op": {"type": "string"}, "ms_per_token": _num,
                                   "share": {"type": "number", "description": "of the timed total"}}}},
            },
        },
        "llamacpp": {"type": ["object", "null"]},
        "warnings": {"type": "array", "items": {"type": "string"}},
    },
}


def tok_s_stats(tok_s: Sequence[float]) -> dict[str, float]:
    a = np.asarray(tok_s, dtype=np.float64)
    q1, median, q3 = np.percentile(a, [25, 50, 75])
    return {"median": float(median), "min": float(a.min()), "max": float(a.max()), "q1": float(q1), "q3": float(q3)}


def _weight_passes(n_tokens: int, batch: int | None) -> int:
    """Times a pp forward of n_tokens reads every weight: once per batch chunk of the engine."""
    return -(-n_tokens // batch) if batch else 1


def _result_rows(run: RunResult, tests: Sequence[BenchTest], weight_bytes: int,
                 batch: dict[str, int | None], kv_bytes_per_token: int = 0) -> list[dict]:
    by_name = {t.name: t for t in tests}
    rows = []
    for (engine, name, threads), seconds in run.seconds.items():
        test = by_name.get(name) or BenchTest.parse(name)
        tok_s = [test.n_tokens / s for s in seconds]
        stats = tok_s_stats(tok_s)
        # a generated token at depth D also reads the cache of the D + (its index) positions before it
        kv_read = kv_bytes_per_token * (test.depth + (test.n_tokens + 1) / 2) if test.depth else 0
        per_token = weight_bytes + kv_read if test.kind == "tg" else \
            weight_bytes * _weight_passes(test.n_tokens, batch.get(engine)) / test.n_tokens
        achieved = per_token * stats["median"] / 1e9
        bw = run.bandwidth.get(threads, {}).get("median")
        spread = 100.0 * (stats["max"] - stats["min"]) / stats["median"]
        rows.append({
            "engine": engine, "test": name, "kind": test.kind, "n_tokens": test.n_tokens, "depth": test.depth,
            "threads": threads,
            "samples_s": list(seconds), "tok_s": stats, "spread_pct": spread, "noisy": spread > NOISE_LIMIT_PCT,
            "bytes_per_token": per_token, "achieved_gbps": achieved, "read_bandwidth_gbps": bw,
            "utilization": achieved / bw if bw else None,
            "ceiling_tok_s": bw * 1e9 / per_token if bw and test.kind == "tg" else None,
            "speedup_vs_1t": None,
        })
    one_thread = {(r["engine"], r["test"]): r["tok_s"]["median"] for r in rows if r["threads"] == 1}
    for r in rows:
        base = one_thread.get((r["engine"], r["test"]))
        r["speedup_vs_1t"] = r["tok_s"]["median"] / base if base else None
    order = {name: i for i, name in enumerate(t.name for t in tests)}
    rows.sort(key=lambda r: (order.get(r["test"], len(order)), r["threads"], ENGINES.index(r["engine"])))
    return rows


def _scaling(rows: list[dict]) -> list[dict]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["engine"], r["test"]), []).append(r)
    out = []
    for (engine, name), cells in groups.items():
        threads = [c["threads"] for c in cells]
        median_s = [c["n_tokens"] / c["tok_s"]["median"] for c in cells]  # time of the median run
        entry = {"engine": engine, "test": name, "threads": sorted(threads), "status": "refused", "p": None,
                 "serial_fraction": None, "t1_s": None, "max_speedup": None, "rms_rel_residual": None,
                 "predicted": [], "notes": []}
        try:
            fit = fit_amdahl(threads, median_s)
        except UnderdeterminedFitError as e:
            entry["notes"].append(str(e))
            out.append(entry)
            continue
        n_tokens = cells[0]["n_tokens"]
        lawful = 0.0 <= fit.p <= 1.0  # outside, a ceiling or a prediction would extrapolate noise
        entry.update({
            "status": "underdetermined" if fit.underdetermined else "fit", "p": fit.p,
            "serial_fraction": fit.serial_fraction, "t1_s": fit.t1,
            "max_speedup": None if not lawful else "inf" if math.isinf(fit.max_speedup) else fit.max_speedup,
            "rms_rel_residual": fit.rms_rel_residual, "notes": list(fit.notes),
            "predicted": [{"threads": n, "speedup": fit.speedup(n), "tok_s": n_tokens / fit.time(n)}
                          for n in next_thread_counts(fit.threads)] if lawful else [],
        })
        out.append(entry)
    return out


def _comparison(rows: list[dict]) -> list[dict]:
    cells = {(r["engine"], r["test"], r["threads"]): r for r in rows}
    out = []
    for (engine, name, threads), ours in cells.items():
        theirs = cells.get(("llama.cpp", name, threads))
        if engine != "onewell" or theirs is None:
            continue
        pairs = [b / a for a, b in zip(ours["samples_s"], theirs["samples_s"])]  # seconds: theirs/ours = our speed-up
        out.append({"test": name, "threads": threads, "onewell_tok_s": ours["tok_s"]["median"],
                    "llamacpp_tok_s": theirs["tok_s"]["median"],
                    "ratio": ours["tok_s"]["median"] / theirs["tok_s"]["median"], "pair_ratios": pairs})
    return out


def _profile(run: RunResult) -> dict | None:
    prof = run.profile
    if not prof or not prof.get("ops") or prof["tokens"] <= 0:
        return None
    tokens = prof["tokens"]
    timed = sum(prof["ops"].values())
    ops = [{"op": op, "ms_per_token": ns / tokens / 1e6, "share": ns / timed} for op, ns in prof["ops"].items()]
    ops.sort(key=lambda o: -o["ms_per_token"])
    return {"threads": run.profile_threads, "tokens": tokens, "steps": prof["steps"],
            "wall_ms_per_token": prof["wall_ns"] / tokens / 1e6, "timed_ms_per_token": timed / tokens / 1e6,
            "ops": ops}


def build_report(run: RunResult, *, tests: Sequence[BenchTest], machine: dict, model: dict, settings: dict,
                 llamacpp: dict | None = None, warnings: Sequence[str] = ()) -> dict:
    """The JSON document (see SCHEMA) for one bench run."""
    batch = {"onewell": settings.get("max_batch"), "llama.cpp": (llamacpp or {}).get("n_ubatch")}
    rows = _result_rows(run, tests, model["weight_bytes_per_token"], batch, model.get("kv_bytes_per_token", 0))
    notes = list(warnings)
    for r in rows:
        if r["noisy"]:
            notes.append(f"{r['engine']} {r['test']} at {r['threads']} thread(s): repetitions disagree by "
                         f"{r['spread_pct']:.1f}% (> {NOISE_LIMIT_PCT:g}%); compare medians with care or rerun "
                         f"on a quiet machine")
    over = sorted({f"{r['engine']} {r['test']}" for r in rows if r["utilization"] and r["utilization"] > 1.0})
    if over:
        notes.append(f"utilization above 100% ({', '.join(over)}): the bandwidth probe read less than the engine "
                     f"did, so it understates this machine (buffer too small, or the host moved the threads)")
    return {
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine, "model": model, "settings": settings,
        "bandwidth": [{"threads": t, "kind": "read", "median_gbps": bw["median"], "min_gbps": bw["min"],
                       "max_gbps": bw["max"]} for t, bw in sorted(run.bandwidth.items())],
        "results": rows, "scaling": _scaling(rows), "comparison": _comparison(rows), "profile": _profile(run),
        "llamacpp": llamacpp, "warnings": notes,
    }


# -- terminal table ----------------------------------------------------------------------------------------

def _fmt(value: float | None, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _markdown(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    cell = lambda text, i: text.rjust(widths[i]) if i in right else text.ljust(widths[i])  # noqa: E731
    lines = ["| " + " | ".join(cell(h, i) for i, h in enumerate(headers)) + " |",
             "| " + " | ".join(("-" * (w - 1) + ":") if i in right else "-" * w for i, w in enumerate(widths)) + " |"]
    lines += ["| " + " | ".join(cell(text, i) for i, text in enumerate(r)) + " |" for r in rows]
    return lines


def render_header(report: dict) -> list[str]:
    m, model, s = report["machine"], report["model"], report["settings"]
    return [
        f"model:   {model['path']} ({model['arch']}, {model.get('file_type') or '?'}, "
        f"{model['file_bytes'] / 1e6:.1f} MB file, {model['weight_bytes_per_token'] / 1e6:.1f} MB of weights "
        f"read per generated token)",
        f"cpu:     {m['cpu_model']} ({m['physical_cores']} physical cores, {m['logical_cpus']} logical"
        f"{', virtualized' if m.get('virtualized') else ''}); ISA {m['isa'] or '?'}, kernel path "
        f"{m['kernel_path'] or '?'}{' (ONEWELL_ISA=' + m['isa_override'] + ')' if m.get('isa_override') else ''}"
        + (f"; {m['cpu_id']}" if m.get("cpu_id") else "")
        + (f", decode prefetch {m['decode_prefetch_bytes']} B" if m.get("decode_prefetch_bytes") is not None else "")
        + (", 512-bit prefill tiles" if m.get("wide_tiles") and m.get("kernel_path") == "avx512" else "")
        + (", float GEMM prefill" + (" (panels overlapped)" if m.get("gemm_overlap") else "")
           + ("; int8 GEMMs with rows in lanes" if m.get("rows_gemm") else "")
           if m.get("float_gemm") and m.get("kernel_path") in ("avx2", "avx2-vnni", "avx512") else ""),
        f"threads: {', '.join(map(str, s['threads']))}; {placement_note(m, s['threads'])}",
        f"engine:  onewell {m['onewell_version']}, backend {s['backend']} ({s['backend_class']}"
        + (f", KV cache {s['kv_type']}" if s.get("kv_type") else "")
        + (f" {s['kv_bytes'] / 1e6:.1f} MB" if s.get("kv_bytes") is not None else "")
        + (f", {model['kv_bytes_per_token'] / 1e3:.1f} kB/token" if model.get("kv_bytes_per_token") else "")
        + "); "
        f"{s['reps']} repetitions{', after a warm-up' if s['warmup'] else ', no warm-up'}"
        + (f"; load average {m['load_average'][0]:.2f} at start" if m.get("load_average") else ""),
    ]


def render_results(report: dict) -> list[str]:
    headers = ["engine", "test", "threads", "tok/s", "min-max", "spread", "x1t", "MB/tok", "GB/s", "read BW",
               "util", "ceiling tok/s"]
    rows = []
    for r in report["results"]:
        st = r["tok_s"]
        rows.append([
            r["engine"], r["test"], str(r["threads"]), f"{st['median']:.2f}",
            f"{st['min']:.1f}-{st['max']:.1f}", f"{r['spread_pct']:.0f}%{' !' if r['noisy'] else ''}",
            _fmt(r["speedup_vs_1t"], ".2f"), f"{r['bytes_per_token'] / 1e6:.1f}", f"{r['achieved_gbps']:.1f}",
            _fmt(r["read_bandwidth_gbps"], ".1f"),
            "-" if r["utilization"] is None else f"{100 * r['utilization']:.0f}%",
            _fmt(r["ceiling_tok_s"], ".1f"),
        ])
    legend = (f"tok/s: median of the repetitions (min-max their range; ! = spread over {NOISE_LIMIT_PCT:g}%). "
              "x1t: speed-up over 1 thread. GB/s = MB/tok x tok/s; util = GB/s / read BW (GB/s at the same thread "
              "count, this run). ceiling = read BW / MB/tok: the tg tok/s if every weight byte came at that "
              "bandwidth. pp reads each weight once per prompt, so its MB/tok is small: pp is compute-bound, "
              "tg bandwidth-bound.")
    return _markdown(headers, rows, right={2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) + textwrap.wrap(legend, 110)


def render_comparison(report: dict) -> list[str]:
    if not report["comparison"]:
        return []
    lines = ["onewell vs llama.cpp (interleaved repetitions; ratio > 1: onewell is faster)"]
    rows = [[c["test"], str(c["threads"]), f"{c['onewell_tok_s']:.2f}", f"{c['llamacpp_tok_s']:.2f}",
             f"{c['ratio']:.2f}", f"{min(c['pair_ratios']):.2f}-{max(c['pair_ratios']):.2f}"]
            for c in report["comparison"]]
    return lines + _markdown(["test", "threads", "onewell tok/s", "llama.cpp tok/s", "ratio", "pair ratios"],
                             rows, right={1, 2, 3, 4, 5})


def render_scaling(report: dict) -> list[str]:
    lines = ["scaling: Amdahl's law t(n) = t1 x ((1 - p) + p / n), least squares on the median times; p = the "
             "part more threads speed up, 1 - p = serial or waiting on the shared memory bus"]
    for s in report["scaling"]:
        label = f"  {s['engine']} {s['test']} (threads {', '.join(map(str, s['threads']))}): "
        if s["status"] == "refused":
            lines.append(label + "no fit. " + " ".join(s["notes"]))
            continue
        ceiling = s["max_speedup"]
        if ceiling is None:
            text = f"p = {s['p']:.2f}, outside 0..1: no ceiling or prediction"
        else:
            text = (f"p = {s['p']:.2f} parallel, {s['serial_fraction']:.2f} serial/bandwidth-bound; ceiling "
                    f"{'unbounded' if ceiling == 'inf' else f'{ceiling:.2f}x'} at any core count")
        if s["predicted"]:
            text += "; predicted " + ", ".join(f"{q['threads']} threads {q['speedup']:.2f}x ({q['tok_s']:.1f} tok/s)"
                                               for q in s["predicted"])
        if s["status"] == "fit":
            text += f"; fit residual {100 * s['rms_rel_residual']:.1f}%"
        lines.append(label + text)
        lines += [f"    note: {n}" for n in s["notes"]]
    return lines


def render_profile(report: dict, bar_width: int = 30) -> list[str]:
    prof = report["profile"]
    if prof is None:
        return ["per-op time: not available (the backend has no native timers)"]
    lines = [f"one generated token by op ({prof['threads']} thread(s), mean of {prof['tokens']} tokens, native "
             f"timers): {prof['timed_ms_per_token']:.2f} ms timed of {prof['wall_ms_per_token']:.2f} ms wall"
             + ("; idle = threads waiting for the slowest at a barrier" if any(o["op"] == "idle" for o in prof["ops"])
                else "")]
    width = max(len(o["op"]) for o in prof["ops"])
    for o in prof["ops"]:
        bar = "#" * max(1, round(bar_width * o["share"])) if o["share"] >= 0.005 else ""
        lines.append(f"  {o['op']:<{width}}  {o['ms_per_token']:8.3f} ms  {100 * o['share']:5.1f}%  {bar}")
    return lines


def render_bandwidth(report: dict) -> list[str]:
    if not report["bandwidth"]:
        return ["read bandwidth: not measured (--no-bandwidth); GB/s is shown, utilization is not"]
    return ["read bandwidth (this run, GB/s = 1e9 B/s, median [min-max]): " + "; ".join(
        f"{b['threads']}t {b['median_gbps']:.1f} [{b['min_gbps']:.1f}-{b['max_gbps']:.1f}]"
        for b in report["bandwidth"])]


def render_report(report: dict) -> str:
    sections = [render_header(report), render_bandwidth(report), render_results(report),
                render_comparison(report), render_scaling(report), render_profile(report),
                [f"warning: {w}" for w in report["warnings"]]]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"

