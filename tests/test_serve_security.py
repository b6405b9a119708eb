"""The server against cross-site pages, hostile bodies and slow clients (issue 13), on a tiny random model:
JSON-only bodies, the Host allow-list, the JSON depth limit, header/body timeouts, the connection limit,
preparation counted against the queue, and per-API-key prompt caches."""
from __future__ import annotations

import concurrent.futures
import json
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import scaled

import onewell
from onewell.serve.app import allowed_hosts_for, build_parser, create_app
from onewell.serve.background import BackgroundServer
from onewell.serve.limits import ServerLimits
from onewell.serve.security import HostAllowList, check_json_depth, host_name, json_depth

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzz.seeds import LLAMA_TINY, tiny_model  # noqa: E402

HI = [{"role": "user", "content": "hello"}]
CHAT = {"messages": HI, "max_tokens": 2}


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    path.write_bytes(tiny_model(LLAMA_TINY, None, seed=1))
    return path


def load(path: Path):
    return onewell.load(path, backend="native", threads=1, n_ctx=64)


@pytest.fixture(scope="module")
def server(tiny_path):
    with BackgroundServer(create_app(load(tiny_path), parallel=2, queue=2)) as s:
        yield s


def post(url: str, body: bytes, content_type: str | None, **headers) -> httpx.Response:
    if content_type is not None:
        headers["content-type"] = content_type
    return httpx.post(url, content=body, headers=headers, timeout=30)


# ---- Content-Type -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonx", ""])
def test_a_body_that_is_not_declared_json_is_415(server, content_type):
    r = post(server.url + "/v1/chat/completions", json.dumps(CHAT).encode(), content_type)
    assert r.status_code == 415, r.text
    assert r.json()["error"]["code"] == "unsupported_media_type"


def test_json_with_a_charset_is_served(server):
    r = post(server.url + "/v1/chat/completions", json.dumps(CHAT).encode(), "application/json; charset=utf-8")
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


# ---- Host -------------------------------------------------------------------------------------------------


def test_host_names_parse():
    assert host_name("Evil.Example:8080") == "evil.example"
    assert host_name("[::1]:8080") == "::1" and host_name("::1") == "::1"
    allow = HostAllowList(["my.box"])
    assert all(allow.allows(h) for h in ["localhost", "localhost:1", "127.0.0.1:9", "127.8.9.1", "[::1]:80",
                                        "app.localhost", "my.box:8080", None])
    assert not any(allow.allows(h) for h in ["evil.example", "evil.example:8080", "localhost.evil.example",
                                            "127.0.0.1.evil.example", "", "0.0.0.0"])
    assert HostAllowList(["*"]).allows("anything.example")


def test_a_foreign_host_header_is_refused(server):
    port = server.port
    r = httpx.get(server.url + "/v1/models", headers={"host": "evil.example"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"
    r = post(server.url + "/v1/chat/completions", json.dumps(CHAT).encode(), "application/json",
             host=f"evil.example:{port}")
    assert r.status_code == 400
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert httpx.get(server.url + "/v1/models", headers={"host": host}).status_code == 200, host


def test_allowed_hosts_extend_the_list(tiny_path):
    with BackgroundServer(create_app(load(tiny_path), allowed_hosts=["my.box"])) as s:
        assert httpx.get(s.url + "/health", headers={"host": "my.box:1234"}).status_code == 200
        assert httpx.get(s.url + "/health", headers={"host": "other.box"}).status_code == 400


def test_the_command_line_adds_allowed_hosts_and_the_listening_address():
    args = build_parser().parse_args(["m.gguf", "--allowed-host", "a.example", "--allowed-host", "b.example"])
    assert args.allowed_host == ["a.example", "b.example"]
    assert allowed_hosts_for("192.168.1.5", args.allowed_host) == ["a.example", "b.example", "192.168.1.5"]
    assert allowed_hosts_for("0.0.0.0", []) == []


# ---- JSON depth -------------------------------------------------------------------------------------------


def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth(b'{"a": [1, {"b": "[[[[\\"[[{"}]}') == 3
    assert json_depth(b"[]") == 1 and json_depth(b'"[[["') == 0 and json_depth(b"{}") == 1
    deep = b"[" * 200_000 + b"]" * 200_000
    assert json_depth(deep) == 200_000
    with pytest.raises(ValueError, match="200001 levels"):
        check_json_depth(b'{"prompt": ' + deep + b"}")
    check_json_depth(b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}", limit=65)


def test_deeply_nested_json_is_400_and_the_server_lives_on(server):
    for depth in (200_000, 1000, 65):
        body = b'{"prompt": ' + b"[" * depth + b"]" * depth + b"}"
        r = post(server.url + "/v1/completions", body, "application/json")
        assert r.status_code == 400 and "nests" in r.json()["error"]["message"], depth
    r = post(server.url + "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 1}).encode(),
             "application/json")
    assert r.status_code == 200


# ---- slow clients and the connection limit ---------------------------------------------------------------


def raw_connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing the socket, or None if it is still open after `seconds`."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except socket.timeout:
        return None
    return data


@pytest.fixture(scope="module")
def strict_server(tiny_path):
    limits = ServerLimits(header_timeout=0.5, body_timeout=0.5, max_connections=6)
    with BackgroundServer(create_app(load(tiny_path), limits=limits)) as s:
        yield s


def test_a_trickling_request_head_is_cut_off(strict_server):
    silent, trickle = raw_connect(strict_server), raw_connect(strict_server)
    trickle.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
    started = time.monotonic()
    for sock in (silent, trickle):
        assert closed_within(sock, 5.0) == b""
        sock.close()
    assert time.monotonic() - started < 3.0
    assert httpx.get(strict_server.url + "/health").status_code == 200


def test_a_keep_alive_connection_gets_a_new_head_deadline_after_each_reply(strict_server):
    sock = raw_connect(strict_server)
    for _ in range(3):
        time.sleep(0.3)  # below the head deadline each time, above it in total
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.settimeout(5)
        reply = b""
        while not reply.endswith(b'{"status":"ok"}'):
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
    assert closed_within(sock, 5.0) is not None  # and then it idles out
    sock.close()


def test_a_trickling_body_is_408(strict_server):
    sock = raw_connect(strict_server)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"prompt\"")
    reply = closed_within(sock, 3.0) or b""  # closed with the reply, not kept alive (5 s) for a request it cannot read
    sock.close()
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]


@pytest.fixture(scope="module")
def limited_server(tiny_path):
    """The connection limit alone: a head deadline far beyond the test, so the idle connections it holds open
    are not closed by strict_server's 0.5 s one before the request it expects to be refused arrives."""
    limits = ServerLimits(header_timeout=60.0, max_connections=6)
    with BackgroundServer(create_app(load(tiny_path), limits=limits)) as s:
        yield s


def test_connections_beyond_the_limit_get_503(limited_server):
    idle = [raw_connect(limited_server) for _ in range(6)]
    try:
        time.sleep(scaled(0.1))  # the server accepts them
        r = httpx.get(limited_server.url + "/health")
        assert r.status_code == 503
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + scaled(5)
    while httpx.get(limited_server.url + "/health").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)


# ---- preparation counted against the queue ---------------------------------------------------------------


class SlowTemplates:
    """A model whose chat template takes `seconds` to render: what a burst of big chat bodies costs."""

    def __init__(self, model, seconds: float):
        self._model, self.seconds, self.calls = model, seconds, 0
        self._lock = threading.Lock()

    def tokenize_chat(self, *args, **kwargs):
        with self._lock:
            self.calls += 1
        time.sleep(self.seconds)
        return self._model.tokenize_chat(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


def test_a_burst_beyond_the_queue_is_refused_before_its_templates_run(tiny_path):
    app = create_app(load(tiny_path), parallel=1, queue=1)
    template_seconds = scaled(1.0)  # the 8 requests must all arrive while the first template renders
    slow = app.state.onewell.model = SlowTemplates(app.state.onewell.model, template_seconds)
    with BackgroundServer(app) as s, httpx.Client(timeout=30, limits=httpx.Limits(max_connections=16)) as client:
        client.get(s.url + "/health")

        def one(_):
            started = time.monotonic()
            r = client.post(s.url + "/v1/chat/completions", json=CHAT)
            return r.status_code, time.monotonic() - started

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
    statuses = sorted(code for code, _ in results)
    assert statuses == [200, 200] + [503] * 6, results  # one slot + one queue place
    assert slow.calls == 2  # the refused ones never reached the template
    assert all(seconds < 0.8 * template_seconds for code, seconds in results if code == 503), results


# ---- prompt caches per API key -------------------------------------------------------------------------


def cached_tokens(url: str, key: str) -> int:
    body = {"prompt": "the same long prompt " * 3, "max_tokens": 1}
    r = httpx.post(url + "/v1/completions", json=body, headers={"authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_cached_prefixes_are_not_shared_between_api_keys(tiny_path):
    with BackgroundServer(create_app(load(tiny_path), api_key=["alice", "bob"])) as s:
        assert cached_tokens(s.url, "alice") == 0
        assert cached_tokens(s.url, "alice") > 0      # her own prefix
        assert cached_tokens(s.url, "bob") == 0       # not hers
        assert cached_tokens(s.url, "bob") > 0
        assert cached_tokens(s.url, "alice") == 0     # bob's request took the slot's cache


def test_sharing_the_prompt_cache_between_keys_is_an_option(tiny_path):
    with BackgroundServer(create_app(load(tiny_path), api_key=["alice", "bob"], share_prompt_cache=True)) as s:
        assert cached_tokens(s.url, "alice") == 0
        assert cached_tokens(s.url, "bob") > 0


def test_several_api_keys_on_the_command_line(monkeypatch):
    args = build_parser().parse_args(["m.gguf", "--api-key", "a", "--api-key", "b", "--share-prompt-cache"])
    assert args.api_key == ["a", "b"] and args.share_prompt_cache
