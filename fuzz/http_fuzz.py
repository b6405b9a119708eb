"""An HTTP request fuzzer against the live server: random JSON shapes, sizes, encodings, headers, methods and
paths, some as raw bytes on a socket. The contract: every request gets a reply that is not a server error
(no 5xx but 503), every error body is OpenAI's error JSON, every 200 stream is well formed, and afterwards the
server is alive, its counters show no failed request, and it still gives the same greedy text.

    .venv/bin/python fuzz/http_fuzz.py --requests 50000 [--model PATH.gguf] [--seed 1] [--clients 4]

Without --model, a tiny random model (fuzz/seeds.py, 1 layer) is served, so the run measures the HTTP side.
The server runs in a child process (fuzz/serve_child.py). tests/test_http_fuzz_smoke.py runs a short
version in-process.
"""
from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

API_PATHS = ("/v1/chat/completions", "/v1/completions")
OTHER_PATHS = ("/v1/models", "/health", "/metrics", "/openapi.json", "/", "/static/chat.js", "/v1/nothing",
               "/static/../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/v1/chat/completions/", "//v1/models",
               "/v1/ch%61t/completions", "/\u00e9t\u00e9", "/" + "a" * 5000, "/v1/models?x=" + "%ff" * 50)
CONTENT_TYPES = ("application/json", "application/json; charset=utf-8", "application/json; charset=utf-16",
                 "APPLICATION/JSON", "application/json;;", "text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=zz", "application/jsonx", "", "\u00e9", None)
HOSTS = (None, None, None, "localhost", "127.0.0.1", "[::1]", "evil.example", "localhost.evil.example", "",
         "a" * 3000, "127.0.0.1:1", "0.0.0.0")
ROLES = ("system", "user", "assistant", "tool", "developer", "", "x" * 100, None, 3)
REFERENCE_PROMPT = "hello world"


# ---- random values ----------------------------------------------------------------------------------------


def random_string(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return "".join(rng.choice("abc xyz <|im_start|>\n\t") for _ in range(rng.randint(0, 20)))
    if kind < 0.7:
        return "".join(chr(rng.choice((rng.randint(0, 0x7F), rng.randint(0x80, 0xFFFF), rng.randint(0x10000, 0x10FFFF))))
                       for _ in range(rng.randint(0, 30))).replace("\ud800", "?")
    if kind < 0.85:
        return rng.choice(("<|im_start|>", "<|im_end|>", "<|endoftext|>", "{{ 7 * 7 }}", "{% for %}", "\x00",
                           "\u202e", "\ufeff", "null", "[DONE]"))
    return rng.choice("xy ") * rng.choice((100, 1000, 10000, 100000))


def random_number(rng: random.Random):
    return rng.choice((0, 1, -1, 2, 4, 2**31, 2**63, 2**64 + 1, -(2**70), 10**400, 0.5, -0.0, 1e308, 1e-320,
                       rng.randint(-1000, 1000), rng.random() * rng.choice((1, 100, 1e10))))


def random_json(rng: random.Random, depth: int = 0):
    kind = rng.random()
    if depth > 4 or kind < 0.25:
        return rng.choice((None, True, False, random_number(rng), random_string(rng)))
    if kind < 0.6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {random_string(rng) if rng.random() < 0.3 else rng.choice(FIELDS): random_json(rng, depth + 1)
            for _ in range(rng.randint(0, 5))}


FIELDS = ("model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
          "min_p", "seed", "stop", "stream", "stream_options", "logprobs", "top_logprobs", "n", "tools",
          "tool_choice", "response_format", "repeat_penalty", "ignore_eos", "user", "echo", "suffix")


def plausible_body(rng: random.Random, chat: bool) -> dict:
    """A valid request, then a few of its fields replaced, removed or added at random."""
    if chat:
        messages = [{"role": rng.choice(("system", "user", "assistant")), "content": random_string(rng)}
                    for _ in range(rng.randint(1, 4))]
        body: dict = {"model": "fuzz", "messages": messages}
    else:
        body = {"model": "fuzz", "prompt": random_string(rng) if rng.random() < 0.8 else
                [rng.randint(0, 300) for _ in range(rng.randint(1, 20))]}
    body["max_tokens"] = rng.randint(1, 4)
    if rng.random() < 0.3:
        body["stream"] = True
    if rng.random() < 0.2:
        body["stream_options"] = {"include_usage": rng.random() < 0.5}
    if rng.random() < 0.3:
        body.update(temperature=rng.choice((0, 0.7, 2)), top_k=rng.choice((0, 1, 40)), seed=rng.randint(0, 99))
    if rng.random() < 0.15:
        body["stop"] = rng.choice(("x", ["a", "b"], [random_string(rng)]))
    if rng.random() < 0.15:
        body["logprobs"] = True if chat else rng.randint(0, 5)
        if chat:
            body["top_logprobs"] = rng.randint(0, 5)
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        action = rng.random()
        key = rng.choice(FIELDS)
        if action < 0.5:
            body[key] = random_json(rng)
        elif action < 0.7:
            body.pop(rng.choice(list(body)), None)
        elif chat and body.get("messages") and isinstance(body["messages"], list):
            message = rng.choice(body["messages"])
            if isinstance(message, dict):
                message[rng.choice(("role", "content", "name", "tool_calls", "tool_call_id", "x"))] = (
                    rng.choice(ROLES) if rng.random() < 0.3 else random_json(rng))
    if isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 8:
        body["max_tokens"] = 8  # keep generations short: the fuzz is about the HTTP side
    return body


def encode(rng: random.Random, text: str) -> bytes:
    kind = rng.random()
    if kind < 0.85:
        return text.encode("utf-8", "surrogatepass")
    if kind < 0.9:
        return text.encode("utf-16", "surrogatepass")
    if kind < 0.93:
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    if kind < 0.96:
        return text.encode("latin-1", "replace")
    raw = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 4)):  # invalid UTF-8 in place
        if raw:
            raw[rng.randrange(len(raw))] = rng.choice((0x80, 0xC3, 0xFF, 0xED, 0x00))
    return bytes(raw)


# ---- requests ---------------------------------------------------------------------------------------------


@dataclass
class Req:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    raw: bytes | None = None  # sent as is on a socket instead
    stream: bool = False

    @property
    def kind(self) -> str:
        return "raw" if self.raw is not None else f"{self.method} {self.path[:40]}"


def random_request(rng: random.Random) -> Req:
    r = rng.random()
    if r < 0.05:
        return raw_request(rng)
    if r < 0.12:
        return Req(rng.choice(("GET", "HEAD", "OPTIONS", "DELETE", "PUT", "POST")), rng.choice(OTHER_PATHS))
    path = rng.choice(API_PATHS)
    method = "POST" if rng.random() < 0.95 else rng.choice(("GET", "PUT", "PATCH", "DELETE"))
    shape = rng.random()
    if shape < 0.7:
        data = plausible_body(rng, chat=path == API_PATHS[0])
        body = encode(rng, json.dumps(data, ensure_ascii=rng.random() < 0.5, allow_nan=True))
    elif shape < 0.8:
        body = encode(rng, json.dumps(random_json(rng), allow_nan=True))
    elif shape < 0.87:
        depth = rng.choice((10, 63, 64, 65, 100, 1000, 100000))
        key = "messages" if rng.random() < 0.5 else "prompt"
        body = f'{{"{key}": {"[" * depth}{"]" * depth}, "max_tokens": 1}}'.encode()
    elif shape < 0.93:
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    elif shape < 0.935:
        body = b'{"prompt": "' + b"x" * rng.choice((100_000, 1_000_000, (8 << 20) + 10)) + b'", "max_tokens": 1}'
    else:
        body = rng.choice((b"", b"{", b"null", b"[]", b'{"prompt": NaN}', b'{"prompt": "a"}' * 2,
                           b'{"messages": [{"role": "user", "content": "' + b"\\ud800" * 10 + b'"}]}',
                           b'{"prompt": "\\u0000", "max_tokens": 1}', b'{"prompt": 1e999999}'))
    headers: dict[str, str] = {}
    ct = rng.choice(CONTENT_TYPES) if rng.random() < 0.3 else "application/json"
    if ct is not None:
        headers["content-type"] = ct
    host = rng.choice(HOSTS) if rng.random() < 0.2 else None
    if host is not None:
        headers["host"] = host
    if rng.random() < 0.1:
        headers["authorization"] = rng.choice(("Bearer x", "Basic abc", "Bearer " + "k" * 5000, ""))
    if rng.random() < 0.05:
        headers["content-encoding"] = rng.choice(("gzip", "br", "identity"))
    if rng.random() < 0.05:
        headers["x-" + "h" * rng.randint(1, 50)] = random_string(rng)[:2000].encode("ascii", "replace").decode()
    stream = b'"stream": true' in body
    return Req(method, path, headers, body, stream=stream)


def raw_request(rng: random.Random) -> Req:
    """Malformed HTTP that only a socket can send."""
    good = b'{"prompt": "hi", "max_tokens": 1}'
    head = b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    choices = [
        head + b"Content-Length: 5\r\n\r\n" + good,                      # shorter than the body
        head + b"Content-Length: -1\r\n\r\n" + good,
        head + b"Content-Length: 99999999999999999999\r\n\r\n" + good,
        head + b"Transfer-Encoding: chunked\r\n\r\n" + b"zz\r\n" + good + b"\r\n0\r\n\r\n",
        head + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nX: " + b"y" * 20000 + b"\r\n\r\n",   # a head over 16 KiB
        b"GET /health HTTP/9.9\r\nHost: localhost\r\n\r\n",
        b"GET /health\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(rng.randrange(256) for _ in range(64)),  # TLS hello
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHo st: x\r\n\r\n",
        b"GET /he\x00alth HTTP/1.1\r\nHost: localhost\r\n\r\n",
        bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))),
        b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" * rng.randint(2, 5),  # pipelined
    ]
    return Req("RAW", "-", raw=rng.choice(choices))


# ---- sending and checking ---------------------------------------------------------------------------------


def send_raw(host: str, port: int, data: bytes) -> int:
    """The status of the first reply (0: the server closed without replying, a valid end for garbage)."""
    with socket.create_connection((host, port), timeout=30) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return 0
        reply = b""
        try:
            while len(reply) < 64 and (chunk := sock.recv(4096)):
                reply += chunk
        except OSError:
            pass
    if reply.startswith(b"HTTP/1.1 "):
        return int(reply[9:12])
    return 0


def check_reply(req: Req, r: httpx.Response, body: bytes) -> str | None:
    """A finding about one (non-raw) reply, or None."""
    if r.status_code >= 500 and r.status_code != 503:
        return f"server error {r.status_code}: {body[:300]!r}"
    if r.status_code >= 400 and req.path in API_PATHS and req.method != "HEAD":
        try:
            err = json.loads(body)["error"]
            assert isinstance(err["message"], str) and err["message"]
        except Exception:
            return f"{r.status_code} without OpenAI's error JSON: {body[:300]!r}"
    if r.status_code == 200 and req.path in API_PATHS and req.method == "POST":
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            lines = [ln for ln in body.decode("utf-8", "replace").split("\n") if ln]
            if not lines or lines[-1] != "data: [DONE]":
                return f"stream without a final [DONE]: {body[-300:]!r}"
            for ln in lines[:-1]:
                if not ln.startswith("data: "):
                    return f"not an SSE data line: {ln[:200]!r}"
                event = json.loads(ln[6:])
                if "error" in event:
                    return f"error event in a stream: {ln[:300]!r}"
        else:
            reply = json.loads(body)
            if not reply.get("choices") or "usage" not in reply:
                return f"200 without choices and usage: {body[:300]!r}"
    return None


@dataclass
class Report:
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    by_kind: Counter = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, status: int, finding: str | None) -> None:
        with self.lock:
            self.requests += 1
            self.statuses[status] += 1
            self.by_kind[kind] += 1
            if finding:
                self.findings.append(finding)

    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500 and status != 503)


def one_request(client: httpx.Client, host: str, port: int, req: Req, report: Report) -> None:
    if req.raw is not None:
        status = send_raw(host, port, req.raw)
        finding = f"raw request answered {status}" if status >= 500 and status != 503 else None
        report.add("raw", status, finding)
        return
    url = f"http://{host}:{port}{req.path}"
    try:
        with client.stream(req.method, url, content=req.body, headers=req.headers) as r:
            body = r.read()
            finding = check_reply(req, r, body)
            status = r.status_code
    except (httpx.RemoteProtocolError, httpx.ReadError) as e:  # a well-formed request must get a reply
        status, finding = -1, f"no reply to {req.method} {req.path[:60]}: {e!r}"
    except httpx.InvalidURL:
        status, finding = -2, None  # the client refused to send it
    except (httpx.LocalProtocolError, UnicodeEncodeError):
        status, finding = -2, None
    report.add(req.kind, status, finding)


def run(url: str, n_requests: int, seed: int = 0, clients: int = 4, progress: bool = False) -> Report:
    """n_requests fuzzed requests from `clients` threads; request i comes from Random(seed, i)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    report = Report()
    counter = iter(range(n_requests))
    lock = threading.Lock()
    started = time.monotonic()

    def worker() -> None:
        with httpx.Client(timeout=60) as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                rng = random.Random(seed * 1_000_003 + i)
                one_request(client, host, int(port), random_request(rng), report)
                if progress and i and i % 5000 == 0:
                    print(f"  {i} requests, {time.monotonic() - started:.0f} s, statuses "
                          f"{dict(sorted(report.statuses.items()))}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(worker) for _ in range(clients)]:
            f.result()
    return report


def greedy_text(url: str) -> str:
    r = httpx.post(url + "/v1/completions", json={"prompt": REFERENCE_PROMPT, "max_tokens": 8, "temperature": 0},
                   timeout=60)
    r.raise_for_status()
    return r.json()["choices"][0]["text"]


def tiny_model_file(directory: Path) -> Path:
    from fuzz.seeds import LLAMA_TINY, tiny_model

    path = directory / "tiny-fuzz.gguf"
    path.write_bytes(tiny_model(LLAMA_TINY, None, seed=1))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--model", default=None, help="a .gguf file (default: a tiny random model)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--json", default=None, help="write the report here")
    args = p.parse_args(argv)

    from fuzz.serve_load import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or tiny_model_file(Path(tmp))
        with ServerProcess(model, parallel=4, queue=4, ctx_size=256) as server:
            before = greedy_text(server.url)
            rss_before = server.rss_kib()
            started = time.monotonic()
            report = run(server.url, args.requests, args.seed, args.clients, progress=True)
            seconds = time.monotonic() - started
            alive = server.health() == {"status": "ok"}
            after = greedy_text(server.url)
            metrics = server.metrics()
            rss_after = server.rss_kib()
    summary = {
        "requests": report.requests, "seconds": round(seconds, 1),
        "statuses": {str(k): v for k, v in sorted(report.statuses.items())},
        "server_errors": report.server_errors(), "findings": len(report.findings),
        "first_findings": report.findings[:10], "alive": alive, "same_greedy_text": before == after,
        "requests_failed": metrics["requests_failed"], "requests_served": metrics["requests_served"],
        "rss_kib": [rss_before, rss_after],
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    ok = (not report.findings and alive and before == after and metrics["requests_failed"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
