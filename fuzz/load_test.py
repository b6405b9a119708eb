"""The big load-and-fault run of `onewell serve` (tests/test_serve_load.py is the small one). Loopback only,
bounded in requests and time; the server runs in a child process whose memory is measured.

    .venv/bin/python fuzz/load_test.py                      # SmolLM2-135M, 1,000 requests, 32 clients
    .venv/bin/python fuzz/load_test.py --requests 200 --json out.json

Phases: reference outputs (each prompt alone) -> warm-up (every slot's whole context once) -> load (clients
streaming, ~20 % hanging up at random points, refused requests not retried) -> bursts beyond the queue ->
hostile requests -> checks (health, counters, every slot still holds a whole context, memory). Prints the
figures as JSON and exits 1 if any check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.serve_load import (PROMPTS, LoadReport, ServerProcess, burst, fault_requests,  # noqa: E402
                             fill_every_slot, reference_outputs, run_load, send_fault, settled_rss_kib, wait_idle)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Load and fault test of onewell serve on 127.0.0.1.")
    p.add_argument("--model", default="smollm2-135m-instruct", help="registry name or .gguf path")
    p.add_argument("--requests", type=int, default=1000, help="requests per round (1000)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--queue", type=int, default=8)
    p.add_argument("--ctx-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=12)
    p.add_argument("--hang-up", type=float, default=0.2, help="fraction of requests that hang up (0.2)")
    p.add_argument("--retries", type=int, default=100, help="times a client sends a request again after a 503 (100)")
    p.add_argument("--rounds", type=int, default=1, help="repeat the load this often, RSS read after each (1)")
    p.add_argument("--bursts", type=int, default=3)
    p.add_argument("--burst-size", type=int, default=0, help="requests per burst (default: 2 x (parallel + queue))")
    p.add_argument("--max-seconds", type=float, default=1200.0, help="stop sending new requests after this long")
    p.add_argument("--rss-tolerance", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.nice(19)
    from onewell.hub import ensure_model

    model = ensure_model(args.model)
    burst_size = args.burst_size or 2 * (args.parallel + args.queue)
    checks: dict[str, bool] = {}
    figures: dict = {"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    started = time.perf_counter()
    with ServerProcess(model, parallel=args.parallel, queue=args.queue, ctx_size=args.ctx_size,
                       threads=args.threads) as server:
        figures["rss_kib_idle_after_start"] = server.rss_kib()
        expected = reference_outputs(server, PROMPTS, args.max_tokens)
        # warm-up: every slot's whole context written once, one wave of concurrent connections (first-touch
        # pages and the allocator's first pools are not growth)
        warm = fill_every_slot(server)
        checks["warm-up fills every slot"] = all(r.done and r.finish_reason == "length" for r in warm)
        burst(server, expected, args.clients, args.max_tokens)
        before = wait_idle(server)
        rss_before = settled_rss_kib(server)

        load, rss_rounds = LoadReport(), []
        for round_index in range(args.rounds):  # RSS after each round: bounded growth levels off, a leak does not
            load.add(run_load(server, expected, args.requests, args.clients, args.max_tokens, args.hang_up,
                              args.seed + round_index, args.max_seconds, retries=args.retries))
            wait_idle(server)
            rss_rounds.append(settled_rss_kib(server))
        spikes = LoadReport()
        for _ in range(args.bursts):
            spikes.add(burst(server, expected, burst_size, args.max_tokens))
            wait_idle(server)

        faults = {}
        with httpx.Client(timeout=60) as client:
            for name, body in fault_requests(args.ctx_size):
                faults[name] = send_fault(client, server.url, name, body).status_code
        after = wait_idle(server)
        rss_after = settled_rss_kib(server)
        refill = fill_every_slot(server)
        health = server.health()

    delta = {k: after[k] - before[k] for k in ("requests_served", "requests_cancelled", "requests_rejected",
                                                "requests_failed", "requests_invalid")}
    admitted = load.admitted + spikes.admitted
    checks.update({
        "no malformed stream or unexpected status": not load.broken and not spikes.broken,
        "every uncut stream equals its single-request output": not load.mismatched and not spikes.mismatched,
        "every request accounted for": load.completed + load.disconnected + load.gave_up == load.requests
        and spikes.completed + spikes.disconnected + spikes.gave_up == spikes.requests,
        "bursts beyond the queue got 503s": spikes.rejected > 0,
        "no slot busy, queue empty": after["active_slots"] == 0 and after["queue_length"] == 0,
        "no request failed": delta["requests_failed"] == 0,
        "served + cancelled == admitted": delta["requests_served"] + delta["requests_cancelled"] == admitted,
        "503 count == server's rejected count": delta["requests_rejected"] == load.rejected + spikes.rejected,
        "hostile requests all got 4xx": all(400 <= s < 500 for s in faults.values()),
        "health answers": health == {"status": "ok"},
        "every slot still holds a whole context": all(r.done and r.finish_reason == "length" for r in refill),
        f"RSS within {args.rss_tolerance:.0%} of before": abs(rss_after - rss_before) <= args.rss_tolerance * rss_before,
    })
    figures.update({
        "load": _report(load), "bursts": {**_report(spikes), "bursts": args.bursts, "burst_size": burst_size},
        "faults": faults, "server_counters_delta": delta,
        "rss_kib_before_load": rss_before, "rss_kib_after_each_round": rss_rounds, "rss_kib_after_load": rss_after,
        "rss_change": round((rss_after - rss_before) / rss_before, 4),
        "seconds": round(time.perf_counter() - started, 1), "checks": checks,
    })
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        print("load_test: FAILED: " + "; ".join(failed), file=sys.stderr)
        for problem in (load.broken + load.mismatched + spikes.broken + spikes.mismatched)[:10]:
            print("  " + problem, file=sys.stderr)
        return 1
    return 0


def _report(r: LoadReport) -> dict:
    return {"requests": r.requests, "attempts": r.attempts, "completed": r.completed, "hung_up": r.disconnected,
            "rejected_503": r.rejected, "gave_up": r.gave_up, "mismatched": len(r.mismatched),
            "broken": len(r.broken), "seconds": round(r.seconds, 1)}


if __name__ == "__main__":
    raise SystemExit(main())
