"""A short run of the HTTP request fuzzer (fuzz/http_fuzz.py) against the live app on a tiny random model:
no server error but 503, OpenAI's error JSON on every refusal, well-formed streams, and afterwards the same
greedy text and no failed request. The >= 50,000-request run is `fuzz/http_fuzz.py` (docs/reliability.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import httpx

import onewell
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzz.http_fuzz import greedy_text, run, tiny_model_file  # noqa: E402

N_REQUESTS = 400


def test_fuzzed_requests_get_no_server_error_and_the_server_stays_correct(tmp_path):
    model = onewell.load(tiny_model_file(tmp_path), backend="native", threads=1, n_ctx=256)
    with BackgroundServer(create_app(model, parallel=2, queue=2)) as server:
        before = greedy_text(server.url)
        report = run(server.url, N_REQUESTS, seed=7, clients=3)
        assert report.requests == N_REQUESTS
        assert report.findings == [] and report.server_errors() == 0, report.findings[:5]
        assert report.statuses[200] > 20 and report.statuses[400] > 50 and report.statuses[415] > 5  # it reached both
        assert httpx.get(server.url + "/health").json() == {"status": "ok"}
        assert greedy_text(server.url) == before
        assert httpx.get(server.url + "/metrics").json()["requests_failed"] == 0
