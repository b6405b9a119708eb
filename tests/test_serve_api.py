"""The live server, driven by the official `openai` client and raw httpx, with SmolLM2-135M on the numpy
reference backend. Servers run in background threads on 127.0.0.1 (free ports); replies are kept short."""
from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import httpx
import openai
import pytest
from conftest import scaled

import onewell
from onewell.api import Model
from onewell.serve.app import create_app
from onewell.serve.background import BackgroundServer
from onewell.serve.slot_backends import new_sequence_backend

pytestmark = pytest.mark.model

N_CTX = 512
HI = [{"role": "user", "content": "Say hello to Ada in one short sentence."}]


@pytest.fixture(scope="module", autouse=True)
def exact_batches():
    """This module's server on the exact kernels (_core.float_gemm 0). From 32 vectors the x86 paths run GEMMs, equal
    to the one-vector kernels to float rounding (docs/perf-log.md, entries 25-37), so a prompt prefilled with others,
    or over a prefix cached from another batch, matches it alone only to rounding, and greedy text can part where
    two tokens are nearly tied (as in any engine that batches requests). What these tests check is the serving:
    streams that stay apart, prefixes reused, slots freed. They run where batching changes no bit, so that a
    comparison of two runs is exact."""
    from onewell._native import _core

    before = _core.float_gemm(0)
    yield
    _core.float_gemm(before)


@pytest.fixture(scope="module")
def model(smollm_path) -> Model:
    return onewell.load(smollm_path, backend="native", threads=1, n_ctx=N_CTX)


def clone(model: Model, tokenizer=None) -> Model:
    """Another Model on the same (already dequantized) weights with a KV cache of its own."""
    return Model(model.spec, tokenizer or model.tokenizer, new_sequence_backend(model.backend, model.spec),
                 path=model.path)


@pytest.fixture(scope="module")
def reference(model) -> Model:
    """Runs requests alone, outside any server: what each server reply must equal."""
    return clone(model)


@pytest.fixture(scope="module")
def server(model):
    with BackgroundServer(create_app(model, parallel=4, queue=4, model_name="smol")) as s:
        yield s


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=scaled(60))


def metrics(server) -> dict:
    return httpx.get(server.url + "/metrics", timeout=scaled(10)).json()


def wait_for(predicate, timeout: float = scaled(15.0), what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


def sse_events(response: httpx.Response) -> list[str]:
    return [line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")]


# ----------------------------------------------------------------------------------------------------------
# Basics


def test_models_health_openapi_and_page(server, client):
    assert [m.id for m in client.models.list().data] == ["smol"]
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    doc = httpx.get(server.url + "/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/v1/chat/completions" in doc["paths"]
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "chat.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "getReader" in httpx.get(server.url + "/static/chat.js").text


def test_chat_completion_matches_the_engine_alone(client, model, reference):
    r = client.chat.completions.create(model="smol", messages=HI, max_tokens=8, temperature=0)
    expected = reference.chat(HI, max_tokens=8, temperature=0)
    assert r.choices[0].message.content == expected and expected
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(model.tokenize_chat(HI))
    assert r.usage.completion_tokens == reference.last_stats.gen_tokens
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.object == "chat.completion" and r.model == "smol" and r.id.startswith("chatcmpl-")


def test_completion_matches_the_engine_alone(client, reference):
    prompt = "The three primary colors are"
    r = client.completions.create(model="smol", prompt=prompt, max_tokens=6, temperature=0)
    assert r.choices[0].text == reference.generate(prompt, max_tokens=6, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6
    ids = reference.tokenizer.encode(prompt, add_bos=reference.tokenizer.add_bos_token)
    by_ids = client.completions.create(model="smol", prompt=ids, max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == r.choices[0].text


def test_streaming_chat_equals_non_streamed_and_ends_with_usage(server, client):
    whole = client.chat.completions.create(model="smol", messages=HI, max_tokens=8, temperature=0)
    pieces, last = [], None
    for chunk in client.chat.completions.create(model="smol", messages=HI, max_tokens=8, temperature=0, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        last = chunk
    assert "".join(pieces) == whole.choices[0].message.content
    assert len(pieces) >= 2  # really streamed, not one lump
    assert last.choices[0].finish_reason == whole.choices[0].finish_reason
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    # raw wire format: the usage chunk, then [DONE] last
    body = {"messages": HI, "max_tokens": 4, "temperature": 0, "stream": True}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=scaled(60)) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    assert events[-1] == "[DONE]"
    final = json.loads(events[-2])
    assert final["usage"]["completion_tokens"] == 4 and final["choices"][0]["finish_reason"] == "length"


def test_stream_options_include_usage_sends_a_usage_only_chunk(client):
    chunks = list(client.chat.completions.create(model="smol", messages=HI, max_tokens=3, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 3
    assert chunks[-2].choices[0].finish_reason == "length" and chunks[-2].usage is None


def test_stop_strings_cut_replies_streamed_or_not(client):
    full = client.completions.create(model="smol", prompt="Count: 1, 2, 3,", max_tokens=12, temperature=0)
    text = full.choices[0].text
    stop = text[len(text) // 3: len(text) // 3 + 2]  # two characters from inside the reply
    assert stop.strip(), text
    expected = text[:text.index(stop)]
    cut = client.completions.create(model="smol", prompt="Count: 1, 2, 3,", max_tokens=12, temperature=0,
                                    stop=[stop, "never-seen"])
    assert cut.choices[0].text == expected and cut.choices[0].finish_reason == "stop"
    streamed = [c.choices[0].text for c in client.completions.create(
        model="smol", prompt="Count: 1, 2, 3,", max_tokens=12, temperature=0, stop=stop, stream=True) if c.choices]
    assert "".join(streamed) == expected
    assert not any(stop in piece for piece in streamed)


def test_logprobs_chat_and_completion(client):
    r = client.chat.completions.create(model="smol", messages=HI, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) .startswith(r.choices[0].message.content[:3])
    for t in content:
        tops = [a.logprob for a in t.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and all(lp <= 0 for lp in tops)
        assert t.token == t.top_logprobs[0].token and t.logprob == pytest.approx(tops[0])  # greedy takes the best
    c = client.completions.create(model="smol", prompt="Hello", max_tokens=4, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == 4 and len(lp.top_logprobs) == 4 and all(len(d) <= 2 for d in lp.top_logprobs)
    assert "".join(lp.tokens) == c.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(4)]


def test_seeded_sampling_repeats(client):
    kwargs = dict(model="smol", messages=HI, max_tokens=6, temperature=0.9, top_p=0.95, seed=1234)
    a = client.chat.completions.create(**kwargs).choices[0].message.content
    b = client.chat.completions.create(**kwargs).choices[0].message.content
    assert a == b


# ----------------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("extra, needle", [
    ({"n": 2}, "n=1"), ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"),
    ({"max_tokens": 10_000}, "context"), ({"seed": -5}, "seed"),
])
def test_bad_parameters_are_400(client, extra, needle):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="smol", messages=HI, **extra)
    assert needle in str(info.value)


def test_malformed_bodies_are_400_with_openai_error_shape(server):
    url = server.url + "/v1/chat/completions"
    cases = [b"{not json", b"[1, 2]", b'{"messages": "hi"}',
             b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
             b'{"messages": [{"role": "user", "content": "x"}], "top_p": Infinity}',
             b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}']
    for body in cases:
        r = httpx.post(url, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, body
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"]
    for kind in ("text/plain", "application/x-www-form-urlencoded"):  # what a cross-site form could send
        r = httpx.post(url, content=json.dumps({"messages": HI}), headers={"content-type": kind})
        assert r.status_code == 415 and "application/json" in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/nothing").status_code == 404
    assert httpx.get(url).status_code == 405
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": N_CTX})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert "do not fit the context" in r.json()["error"]["message"]


def test_text_too_long_for_any_tokenization_is_refused_before_tokenizing(server, model):
    tok = model.tokenizer
    longest = max(len(tok.token_bytes(i)) for i in range(tok.n_vocab))
    huge = "word " * (N_CTX * longest // 5 + 1)  # more bytes than N_CTX tokens can cover
    for path, body in (("/v1/completions", {"prompt": huge, "max_tokens": 1}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": huge}], "max_tokens": 1})):
        t0 = time.perf_counter()
        r = httpx.post(server.url + path, json=body, timeout=scaled(60))
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
        assert "bytes of text" in r.json()["error"]["message"]
        assert time.perf_counter() - t0 < 2.0  # refused by counting bytes, not by tokenizing
    assert httpx.get(server.url + "/health").status_code == 200


def test_model_without_chat_template_gets_a_clear_400(model):
    class NoTemplate:
        chat_template = None

        def __getattr__(self, name):
            return getattr(model.tokenizer, name)

    with BackgroundServer(create_app(clone(model, NoTemplate()))) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json={"messages": HI})
        assert r.status_code == 400 and "no chat template" in r.json()["error"]["message"]
        ok = httpx.post(s.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2})  # plain text still works
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2


def test_unexpected_errors_are_a_short_500_without_traceback(model):
    broken = clone(model)
    broken.tokenize_chat = lambda messages: 1 / 0  # a bug, not a user error

    class FailingBackend:
        def __init__(self, inner):
            self.inner = inner
            self.n_ctx = inner.n_ctx

        @property
        def n_past(self):
            return self.inner.n_past

        def forward(self, tokens, all_logits=False):
            raise RuntimeError("kernel exploded")

        def truncate(self, n):
            self.inner.truncate(n)

        def reset(self):
            self.inner.reset()

    broken.backend = FailingBackend(broken.backend)
    with BackgroundServer(create_app(broken), log_level="critical") as s:
        r = httpx.post(s.url + "/v1/chat/completions", json={"messages": HI})
        assert r.status_code == 500 and r.json()["error"]["message"] == "internal server error"
        assert "Traceback" not in r.text and "ZeroDivision" not in r.text
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2})
        assert r.status_code == 500 and "kernel exploded" not in r.text
        with httpx.stream("POST", s.url + "/v1/completions", json={"prompt": "Hi", "stream": True}) as resp:
            events = sse_events(resp)
        assert events[-1] == "[DONE]" and "error" in json.loads(events[-2])
        assert httpx.get(s.url + "/health").status_code == 200
        assert httpx.get(s.url + "/metrics").json()["requests_failed"] == 2


# ----------------------------------------------------------------------------------------------------------
# Concurrency, cancellation, queueing, prefix reuse


def test_four_concurrent_streams_equal_each_alone(server, client):
    topics = ["cats", "the sea", "prime numbers", "bread"]
    requests = [[{"role": "user", "content": f"Write one sentence about {t}."}] for t in topics]

    def stream(messages) -> str:
        return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="smol", messages=messages, max_tokens=10, temperature=0, stream=True) if c.choices)

    alone = [stream(m) for m in requests]
    peak = 0
    done = threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, metrics(server)["active_slots"])
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            together = list(pool.map(stream, requests))
    finally:
        done.set()
        watcher.join()
    assert together == alone
    assert len(set(alone)) == 4 and all(alone)
    assert peak >= 2, "the requests never ran at the same time"


def test_client_leaving_mid_stream_frees_its_slot(server):
    before = metrics(server)
    body = {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": True, "temperature": 0}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=scaled(60)) as resp:
        lines = resp.iter_lines()
        got = [next(lines) for _ in range(4)]  # a couple of events, then hang up
    assert any(line.startswith("data: ") for line in got)
    after = wait_for(lambda: (m := metrics(server))["active_slots"] == 0 and m, what="the slot to be freed")
    assert after["requests_cancelled"] == before["requests_cancelled"] + 1
    assert after["tokens_generated"] - before["tokens_generated"] < 400
    assert httpx.get(server.url + "/health").status_code == 200


def test_client_leaving_a_non_streamed_request_frees_its_slot(server):
    before = metrics(server)
    body = {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "temperature": 0}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions", json=body, timeout=httpx.Timeout(10, read=0.5))
    after = wait_for(lambda: (m := metrics(server))["active_slots"] == 0
                     and m["requests_cancelled"] > before["requests_cancelled"] and m, what="the cancellation")
    assert after["requests_cancelled"] == before["requests_cancelled"] + 1


def test_multi_turn_chat_reuses_the_cached_prefix(server, client):
    turn1 = [{"role": "user", "content": "My name is Ada. Remember it."}]
    r1 = client.chat.completions.create(model="smol", messages=turn1, max_tokens=8, temperature=0)
    turn2 = turn1 + [{"role": "assistant", "content": r1.choices[0].message.content},
                     {"role": "user", "content": "What is my name?"}]
    before = metrics(server)
    r2 = client.chat.completions.create(model="smol", messages=turn2, max_tokens=4, temperature=0)
    after = metrics(server)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    assert cached >= r1.usage.prompt_tokens
    evaluated = after["prompt_tokens_evaluated"] - before["prompt_tokens_evaluated"]
    assert evaluated == r2.usage.prompt_tokens - cached < r2.usage.prompt_tokens / 2
    assert after["prompt_tokens_cached"] - before["prompt_tokens_cached"] == cached


def test_queue_full_is_503_with_retry_after(model):
    with BackgroundServer(create_app(clone(model), parallel=1, queue=1)) as s:
        body = {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.Client(base_url=s.url, timeout=scaled(60)) as first, \
                httpx.Client(base_url=s.url, timeout=scaled(60)) as second:
            with first.stream("POST", "/v1/completions", json=body) as running:
                first_lines = running.iter_lines()  # keep a reference: a collected iterator closes the stream
                assert next(first_lines).startswith("data: ")
                waiting_lines: list[str] = []

                def wait_in_queue():
                    with second.stream("POST", "/v1/completions", json={**body, "max_tokens": 3}) as resp:
                        waiting_lines.extend(resp.iter_lines())

                t = threading.Thread(target=wait_in_queue)
                t.start()
                wait_for(lambda: httpx.get(s.url + "/metrics").json()["queue_length"] == 1,
                         what=lambda: f"a queued request: {httpx.get(s.url + '/metrics').json()}")
                r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1})
                assert r.status_code == 503 and r.headers["retry-after"].isdigit()
                assert r.json()["error"]["code"] == "queue_full"
            t.join(30)  # the first client left: the queued one gets the slot and finishes
        assert "data: [DONE]" in waiting_lines
        m = httpx.get(s.url + "/metrics").json()
        assert m["requests_rejected"] == 1 and m["requests_cancelled"] == 1 and m["active_slots"] == 0


def test_shutdown_ends_running_streams_cleanly_and_fast(model):
    server = BackgroundServer(create_app(clone(model))).start()
    lines: list[str] = []

    def read():
        body = {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=30) as resp:
            lines.extend(resp.iter_lines())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_for(lambda: len(lines) or metrics(server)["tokens_generated"] > 2, what="the reply to start")
    finally:
        started = time.monotonic()
        server.stop()
        reader.join(10)
    assert time.monotonic() - started < 5  # did not wait for 400 tokens
    events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and "shutting down" in json.loads(events[-2])["error"]["message"]


# ----------------------------------------------------------------------------------------------------------
# Authentication


def test_api_key_is_enforced(model):
    with BackgroundServer(create_app(clone(model), api_key="s3cret")) as s:
        anonymous = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            anonymous.models.list()
        with pytest.raises(openai.AuthenticationError):
            anonymous.chat.completions.create(model="x", messages=HI, max_tokens=1)
        assert httpx.post(s.url + "/v1/completions", json={"prompt": "x"}).status_code == 401
        assert httpx.get(s.url + "/metrics").status_code == 401
        r = httpx.get(s.url + "/v1/models", headers={"Authorization": "Basic s3cret"})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        # public: liveness and the page (which asks for the key itself)
        assert httpx.get(s.url + "/health").status_code == 200 and httpx.get(s.url + "/").status_code == 200
        good = openai.OpenAI(base_url=s.url + "/v1", api_key="s3cret", max_retries=0)
        assert good.chat.completions.create(model="x", messages=HI, max_tokens=2).usage.completion_tokens == 2


def test_reference_slots_share_weights_but_not_caches(smollm_path):
    ref = onewell.load(smollm_path, backend="reference", n_ctx=64)
    twin = new_sequence_backend(ref.backend, ref.spec)
    assert twin.layers is ref.backend.layers and twin.output is ref.backend.output  # no second dequantized copy
    assert twin.cache is not ref.backend.cache and twin.n_past == 0
    ids = ref.tokenizer.encode("The sky is")
    a = ref.backend.forward(ids)
    b = twin.forward(ids)
    assert ref.backend.n_past == twin.n_past == len(ids)
    assert (a == b).all()
    ref.backend.forward([int(a.argmax())])
    assert twin.n_past == len(ids)


# ----------------------------------------------------------------------------------------------------------
# The command


def test_onewell_serve_command_serves_and_stops_on_ctrl_c(smollm_path):
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a free port (released again just before the server takes it)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "onewell", "serve", str(smollm_path), "--threads", "1",
                             "--port", str(port), "--ctx-size", "256", "--parallel", "2", "--name", "cli-smol",
                             "--kv-type", "q8_0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"

        def up():
            assert proc.poll() is None, proc.communicate()[1]
            try:
                return httpx.get(url + "/health", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, timeout=60, what="the server to come up")
        card = httpx.get(url + "/v1/models").json()["data"][0]
        assert card["id"] == "cli-smol" and card["meta"]["n_ctx"] == 256 and card["meta"]["slots"] == 2
        assert card["meta"]["kv_type"] == "q8_0"   # --kv-type reached the slots' shared executor
        r = httpx.post(url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

