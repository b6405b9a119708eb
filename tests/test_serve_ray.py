"""`onewell serve --replicas`: the Ray Serve deployment (serve/ray_*.py) and the Prometheus /metrics.

Fast tests (no Ray cluster): prefix keys and affinity, options and YAML config, Prometheus text, the
message without Ray, the replica header. `-m ray`: one local Ray cluster (2 CPUs, small object store)
serving SmolLM2 with 2 replicas, driven through the `openai` client; Ray is shut down afterwards.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import logging
import socket
import sys
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from onewell.errors import OnewellError
from onewell.serve import ray_prefix
from onewell.serve.ray_options import RayServeOptions, add_ray_arguments, apply_config_file, options_from_args
from onewell.serve.ray_prefix import PrefixTable, preferred_replica, prefix_keys, prompt_text


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except httpx.HTTPError as e:
            last = e
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def prom_samples(text: str) -> dict[tuple[str, str], float]:
    """(sample name, replica label) -> value."""
    return {(s.name, s.labels.get("replica", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


# ---------------------------------------------------------------------------------------------------------
# Prefix affinity, without Ray


def chat_body(*messages: tuple[str, str]) -> bytes:
    import json

    return json.dumps({"model": "m", "messages": [{"role": r, "content": c} for r, c in messages]}).encode()


def test_prefix_keys_of_a_growing_conversation_extend_the_earlier_ones():
    system = ("system", "You are a terse assistant. " * 8)
    first = prompt_text("/v1/chat/completions", chat_body(system, ("user", "Name a prime.")))
    second = prompt_text("/v1/chat/completions",
                         chat_body(system, ("user", "Name a prime."), ("assistant", "7."), ("user", "Another?")))
    k1, k2 = prefix_keys(first), prefix_keys(second)
    whole_blocks = len(first) // ray_prefix.BLOCK_CHARS
    assert whole_blocks >= 3 and k2[:whole_blocks] == k1[:whole_blocks]
    assert k1[-1] not in k2  # the full-text key of the first prompt is not a prefix key of the longer one
    other = prompt_text("/v1/chat/completions", chat_body(("system", "Be verbose. " * 20), ("user", "Hi")))
    assert not set(prefix_keys(other)) & set(k1)


def test_prompt_text_of_each_request_kind():
    assert prompt_text("/v1/completions", b'{"prompt": "abc"}') == "abc"
    assert prompt_text("/v1/completions", b'{"prompt": ["abc"]}') == "abc"
    assert prompt_text("/v1/completions", b'{"prompt": [1, 2, 3]}') == "1 2 3 "
    assert prompt_text("/v1/chat/completions", b'{"messages": [{"role": "user", "content": '
                                                b'[{"type": "text", "text": "hi"}]}]}') == "user\x1fhi\x1e"
    for path, body in (("/v1/models", b"{}"), ("/v1/completions", b"not json"), ("/v1/completions", b"[1]"),
                       ("/v1/chat/completions", b'{"messages": 3}')):
        assert prompt_text(path, body) is None
    assert prefix_keys("") == [] and len(prefix_keys("x" * 64)) == 1 and len(prefix_keys("x" * 65)) == 2
    assert len(prefix_keys("x" * 100_000)) == ray_prefix.MAX_BLOCKS


def test_preferred_replica_is_the_prefix_holder_unless_it_is_busy():
    table = PrefixTable(size=1000)
    long_prompt = prefix_keys("shared system prompt " * 10 + "question one")
    table.record(long_prompt, "A")
    table.record(prefix_keys("something else entirely " * 5), "B")
    follow_up = prefix_keys("shared system prompt " * 10 + "question two")
    assert preferred_replica(table, follow_up, {"A": 0, "B": 0}, free_below=2) == "A"
    assert preferred_replica(table, follow_up, {"A": 1, "B": 0}, free_below=2) == "A"
    assert preferred_replica(table, follow_up, {"A": None, "B": 0}, free_below=2) == "A"  # unknown: Ray probes
    assert preferred_replica(table, follow_up, {"A": 2, "B": 0}, free_below=2) is None  # no free slot
    assert preferred_replica(table, follow_up, {"B": 0}, free_below=2) is None  # A is gone
    assert preferred_replica(table, prefix_keys("unrelated"), {"A": 0, "B": 0}, free_below=2) is None
    table.forget("A")
    assert preferred_replica(table, follow_up, {"A": 0, "B": 0}, free_below=2) is None


def test_prefix_table_is_bounded_and_keeps_the_recent_keys():
    table = PrefixTable(size=10)
    for i in range(30):
        table.record([bytes([i])], f"r{i}")
    assert len(table) == 10
    assert table.lookup([bytes([29])], {"r29"}) == ("r29", 1)
    assert table.lookup([bytes([0])], {"r0"}) is None


# ---------------------------------------------------------------------------------------------------------
# Options, config file, missing Ray


def parse(*argv: str) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    from onewell.serve.app import build_parser

    parser = build_parser()
    return parser.parse_args(["smollm2-135m-instruct", *argv]), parser


def test_fixed_replicas_become_deployment_settings():
    args, _ = parse("--replicas", "3", "--threads", "2", "--parallel", "2", "--queue", "4")
    o = options_from_args(args)
    s = o.engine_deployment_settings()
    assert s["num_replicas"] == 3 and "autoscaling_config" not in s
    assert s["max_ongoing_requests"] == 2 + 4 + 1  # slots + queue, + 1 so a full replica answers its own 503
    assert s["ray_actor_options"] == {"num_cpus": 2.0}


def test_replicas_get_the_single_servers_keys_hosts_and_cache_sharing():
    args, _ = parse("--replicas", "2", "--api-key", "a", "--api-key", "b", "--allowed-host", "lb.example",
                    "--host", "10.0.0.5", "--share-prompt-cache")
    o = options_from_args(args)
    assert o.api_key == ("a", "b") and o.share_prompt_cache is True
    assert o.allowed_hosts == ("lb.example", "10.0.0.5")   # the ingress passes clients' Host headers on
    assert RayServeOptions(model="m", api_key="k").api_key == ("k",)   # one key, never its characters
    assert RayServeOptions(model="m").api_key is None and RayServeOptions(model="m").allowed_hosts == ()


def test_autoscaling_from_the_command_line_and_a_yaml_file(tmp_path):
    args, _ = parse("--min-replicas", "1", "--max-replicas", "4", "--target-ongoing-requests", "3")
    s = options_from_args(args).engine_deployment_settings()
    assert s["autoscaling_config"] == {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 1,
                                       "target_ongoing_requests": 3.0}
    assert "num_replicas" not in s
    config = tmp_path / "deploy.yaml"
    config.write_text("replicas: 2\nmax-replicas: 6\nthreads: 3\nray_address: auto\nparallel: 5\n")
    args, parser = parse("--config", str(config), "--parallel", "2")
    apply_config_file(args, parser)
    o = options_from_args(args)
    assert (args.ray_address, o.replicas, o.max_replicas, o.threads) == ("auto", 2, 6, 3)
    assert o.parallel == 2  # the command line wins
    assert o.engine_deployment_settings()["autoscaling_config"]["target_ongoing_requests"] == 2.0


@pytest.mark.parametrize("text, complaint", [
    ("replica: 2\n", "unknown option 'replica'"),
    ("replicas: two\n", "replicas must be a int"),
    ("- 1\n", "mapping"),
    ("replicas: [\n", "not valid YAML"),
])
def test_bad_config_files_are_named(tmp_path, text, complaint):
    config = tmp_path / "c.yaml"
    config.write_text(text)
    args, parser = parse("--config", str(config))
    with pytest.raises(OnewellError, match=complaint):
        apply_config_file(args, parser)


def test_inconsistent_replica_counts_are_refused():
    with pytest.raises(OnewellError, match="within"):
        RayServeOptions(model="m", replicas=5, max_replicas=4)
    with pytest.raises(OnewellError, match="min-replicas"):
        RayServeOptions(model="m", replicas=2, min_replicas=3, max_replicas=2)


def test_without_ray_the_command_says_how_to_install_it(monkeypatch, capsys):
    from onewell import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    monkeypatch.delitem(sys.modules, "onewell.serve.ray_app", raising=False)
    assert cli.main(["serve", "smollm2-135m-instruct", "--replicas", "2"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'onewell[ray]'" in err and "Traceback" not in err


def test_ray_arguments_do_not_change_the_single_server():
    p = argparse.ArgumentParser()
    add_ray_arguments(p)
    from onewell.serve.ray_options import wants_ray

    assert not wants_ray(p.parse_args([]))
    assert wants_ray(p.parse_args(["--replicas", "1"])) and wants_ray(p.parse_args(["--ray-address", "auto"]))


# ---------------------------------------------------------------------------------------------------------
# Prometheus /metrics and the replica header on the single server


@pytest.mark.model
def test_single_server_metrics_in_prometheus_format_and_the_replica_header(smollm_path):
    import onewell
    from onewell.serve.app import create_app
    from onewell.serve.background import BackgroundServer

    model = onewell.load(smollm_path, threads=1, n_ctx=256)
    with BackgroundServer(create_app(model, parallel=2, queue=3, replica_id="r-test", api_key="k")) as s:
        auth = {"Authorization": "Bearer k"}
        r = httpx.post(s.url + "/v1/completions", headers=auth, timeout=60,
                       json={"prompt": "One, two,", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200 and r.headers["x-onewell-replica"] == "r-test"
        assert httpx.get(s.url + "/metrics").headers["x-onewell-replica"] == "r-test"  # the 401 too
        as_json = httpx.get(s.url + "/metrics", headers=auth).json()  # */*: the JSON as before
        assert as_json["slots"] == 2 and as_json["requests_served"] == 1
        for headers in ({"Accept": "text/plain;version=0.0.4"}, {"Accept": "application/openmetrics-text"}):
            r = httpx.get(s.url + "/metrics", headers={**auth, **headers})
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
            got = prom_samples(r.text)
            assert got[("onewell_slots", "")] == 2 and got[("onewell_queue_capacity", "")] == 3
            assert got[("onewell_requests_served_total", "")] == 1
            assert got[("onewell_tokens_generated_total", "")] == as_json["tokens_generated"]
        assert "onewell_slots 2.0" in httpx.get(s.url + "/metrics?format=prometheus", headers=auth).text


# ---------------------------------------------------------------------------------------------------------
# A local Ray cluster serving SmolLM2 with 2 replicas

API_KEY = "ray-test-key"
LONG_SYSTEM = ("You are a helpful assistant for a small bakery. You answer questions about bread, opening "
               "hours and prices in one short sentence, and you never invent products. ") * 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_server(smollm_path):
    import ray
    from ray import serve

    from onewell.serve.ray_app import build_application
    from onewell.serve.ray_options import APP_NAME

    ray.init(num_cpus=2, object_store_memory=100 << 20, include_dashboard=False, logging_level=logging.WARNING,
             log_to_driver=False)
    try:
        port = _free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        options = RayServeOptions(model=str(smollm_path), replicas=2, threads=1, parallel=2, queue=4,
                                  ctx_size=512, api_key=API_KEY, name="smol")
        serve.run(build_application(options), name=APP_NAME, route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: (h := httpx.get(url + "/health", timeout=10).json())["status"] == "ok"
                 and len(h["replicas"]) == 2 and all(r["metrics"] for r in h["replicas"]),
                 timeout=90, what="2 replicas reporting in /health")
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()


def _metrics(url: str) -> dict:
    return httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10).json()


@pytest.mark.ray
@pytest.mark.model
@pytest.mark.slow
def test_two_replicas_behind_one_endpoint(ray_server):
    url = ray_server
    health = httpx.get(url + "/health", timeout=10).json()
    replica_ids = {r["id"] for r in health["replicas"]}
    assert len(replica_ids) == 2 and all(r["metrics"]["slots"] == 2 for r in health["replicas"])
    client = openai.OpenAI(base_url=url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)

    # 8 concurrent requests (different prompts: no prefix to follow): all answered, by both replicas
    def ask(i: int):
        raw = client.chat.completions.with_raw_response.create(
            model="smol", messages=[{"role": "user", "content": f"Say the number {i} in words."}],
            max_tokens=6, temperature=0)
        return raw.headers["x-onewell-replica"], raw.parse()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    assert all(r.choices[0].message.content and r.usage.completion_tokens >= 1 for _, r in answers)
    assert {rid for rid, _ in answers} == replica_ids

    # a conversation's follow-ups go where its prefix is cached, and reuse it
    first = client.chat.completions.with_raw_response.create(
        model="smol", messages=[{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Hi"}],
        max_tokens=4, temperature=0)
    holder = first.headers["x-onewell-replica"]
    for question in ("When do you open?", "Is rye bread sold?", "What costs a baguette?"):
        r = client.chat.completions.with_raw_response.create(
            model="smol", messages=[{"role": "system", "content": LONG_SYSTEM},
                                    {"role": "user", "content": question}], max_tokens=4, temperature=0)
        assert r.headers["x-onewell-replica"] == holder
        assert r.parse().usage.prompt_tokens_details.cached_tokens > 50

    # streaming through the ingress, with the header
    chunks = list(client.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": "Count to three."}], max_tokens=8, temperature=0,
        stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    with httpx.stream("POST", url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"},
                      json={"prompt": "A, B, C,", "max_tokens": 5, "stream": True}, timeout=60) as r:
        lines = [line for line in r.iter_lines() if line]
        assert r.headers["x-onewell-replica"] in replica_ids
    assert lines[-1] == "data: [DONE]" and len(lines) >= 3

    # a client that hangs up mid-stream frees its slot (seen in the replicas' metrics)
    before = _metrics(url)
    with httpx.stream("POST", url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"},
                      json={"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": True},
                      timeout=60) as r:
        for n, _ in enumerate(r.iter_lines()):
            if n >= 3:
                break  # leaving the block closes the connection
    after = wait_for(lambda: (m := _metrics(url))["requests_cancelled"] > before["requests_cancelled"]
                     and m["active_slots"] == 0 and m, timeout=30, what="the hung-up request's slot to be freed")
    assert after["tokens_generated"] - before["tokens_generated"] < 400

    # auth and metrics at the ingress: per replica, in Prometheus format
    assert httpx.get(url + "/v1/models", timeout=10).status_code == 401
    models = httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10)
    assert models.json()["data"][0]["id"] == "smol" and models.headers["x-onewell-replica"] in replica_ids
    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}",
                                                "Accept": "text/plain"}, timeout=10).text
    served = {rid: v for (name, rid), v in prom_samples(text).items() if name == "onewell_requests_served_total"}
    assert set(served) == replica_ids and sum(served.values()) >= 8 + 4 + 2


@pytest.mark.ray
@pytest.mark.model
@pytest.mark.slow
def test_full_replicas_answer_503_end_to_end(ray_server, smollm_path):
    """1 slot and no queue per replica: Ray holds at most 2 requests per replica (the second meets the
    replica's own 503) and 1 more in the ingress; the rest get the ingress's 503. Nobody hangs."""
    from ray import serve

    from onewell.serve.ray_app import build_application
    from onewell.serve.ray_options import APP_NAME

    url = ray_server
    tight = RayServeOptions(model=str(smollm_path), replicas=2, threads=1, parallel=1, queue=0, ctx_size=512,
                            api_key=API_KEY, name="smol")
    serve.run(build_application(tight), name=APP_NAME, route_prefix="/")
    wait_for(lambda: (h := httpx.get(url + "/health", timeout=10).json())["status"] == "ok"
             and len(h["replicas"]) == 2 and all((r["metrics"] or {}).get("queue_capacity") == 0
                                                 for r in h["replicas"]),
             timeout=90, what="the redeployed replicas")

    def post(i: int) -> httpx.Response:
        return httpx.post(url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120,
                          json={"prompt": f"Story number {i}:", "max_tokens": 24, "ignore_eos": True})

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        replies = list(pool.map(post, range(10)))
    codes = sorted(r.status_code for r in replies)
    assert set(codes) == {200, 503} and codes.count(200) >= 2, codes
    for r in replies:
        if r.status_code == 503:
            assert r.headers["retry-after"] and r.json()["error"]["type"] == "server_overloaded"
        else:
            assert r.json()["usage"]["completion_tokens"] == 24
    wait_for(lambda: _metrics(url)["active_slots"] == 0, timeout=30, what="idle replicas")
