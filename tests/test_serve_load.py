"""The server under load and faults (small version; fuzz/load_test.py is the big one): SmolLM2-135M on the
native backend in a child process on 127.0.0.1, 32 concurrent streaming clients with ~20 % hanging up at a
random point, a burst beyond the queue, then hostile requests. Afterwards the server is healthy, every
uncut stream equals its single-request output, refusals were 503s, counters add up, no slot or KV cache is
lost and resident memory is back within 5 % of its level before the load."""
from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from conftest import scaled

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fuzz/ folder at the repository root

from fuzz.serve_load import (PROMPTS, ServerProcess, burst, fault_requests, fill_every_slot,  # noqa: E402
                             reference_outputs, run_load, send_fault, settled_rss_kib, wait_idle)

pytestmark = [pytest.mark.model, pytest.mark.slow]

# 32 clients against 4 slots + 12 queue places: the load itself goes beyond the queue, and so does the burst.
PARALLEL, QUEUE, N_CTX, MAX_TOKENS = 4, 12, 96, 4
N_CLIENTS, N_REQUESTS, BURST = 32, 40, PARALLEL + QUEUE + 8
RSS_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def server(smollm_path):
    with ServerProcess(smollm_path, parallel=PARALLEL, queue=QUEUE, ctx_size=N_CTX, threads=1) as s:
        yield s


@pytest.fixture(scope="module")
def expected(server):
    return reference_outputs(server, PROMPTS[:4], MAX_TOKENS)


def test_load_with_hang_ups_and_a_burst_leaves_the_server_as_it_was(server, expected):
    # Warm-up: every slot's whole KV cache written once and one wave of concurrent connections, so
    # first-touch pages and the allocator's first pools do not count as growth (fuzz/load_test.py --rounds
    # shows growth levels off after the first wave).
    assert all(r.done and r.finish_reason == "length" for r in fill_every_slot(server)), "warm-up failed"
    burst(server, expected, N_CLIENTS, MAX_TOKENS)
    before = wait_idle(server)
    rss_before = settled_rss_kib(server)

    load = run_load(server, expected, N_REQUESTS, N_CLIENTS, MAX_TOKENS, hang_up_fraction=0.2, seed=1)
    spike = burst(server, expected, BURST, MAX_TOKENS)

    after = wait_idle(server)
    rss_after = settled_rss_kib(server)
    for report in (load, spike):
        assert report.broken == [] and report.mismatched == []
        assert report.completed + report.disconnected + report.gave_up == report.requests
    assert load.requests == N_REQUESTS and load.completed > 0 and load.disconnected > 0 and load.rejected > 0
    assert spike.requests == BURST and spike.rejected > 0 and spike.completed >= PARALLEL + QUEUE

    # nothing leaked: no busy slot, no waiting job, every admitted request served or cancelled, none failed
    assert after["active_slots"] == 0 and after["queue_length"] == 0
    delta = {k: after[k] - before[k] for k in ("requests_served", "requests_cancelled", "requests_rejected",
                                                "requests_failed")}
    admitted = load.admitted + spike.admitted
    assert delta["requests_failed"] == 0
    assert delta["requests_rejected"] == load.rejected + spike.rejected
    assert delta["requests_served"] + delta["requests_cancelled"] == admitted
    assert server.health() == {"status": "ok"}
    refill = fill_every_slot(server)  # each slot still holds a whole context
    assert all(r.done and r.finish_reason == "length" for r in refill), refill
    assert abs(rss_after - rss_before) <= RSS_TOLERANCE * rss_before, (rss_before, rss_after)


def test_hostile_requests_get_a_clear_4xx_and_the_server_stays_up(server, expected):
    invalid_before = server.metrics()["requests_invalid"]
    cases = fault_requests(N_CTX)
    with httpx.Client(timeout=scaled(60)) as client:
        for name, body in cases:
            r = send_fault(client, server.url, name, body)
            assert 400 <= r.status_code < 500, (name, r.status_code, r.text[:300])
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error" and error["message"], name
    assert server.metrics()["requests_invalid"] - invalid_before == len(cases)
    assert server.health() == {"status": "ok"}
    prompt = PROMPTS[0]
    with httpx.Client(timeout=scaled(60)) as client:
        from fuzz.serve_load import stream_completion

        again = stream_completion(client, server.url, prompt, MAX_TOKENS)
    assert again.done and again.text == expected[prompt].text
