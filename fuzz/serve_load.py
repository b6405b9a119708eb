"""Load and fault testing of `onewell serve`, on loopback only, bounded in request count and time.

The server runs in a child process (fuzz/serve_child.py) so its resident memory can be read from /proc.
Many client threads stream greedy completions; some hang up at a random point; bursts go beyond the queue.
What must hold afterwards:
  * every stream that was not cut off is complete and well formed (chunks, one finish_reason, usage, [DONE])
    and its text equals what the same prompt gives when it is the server's only request;
  * every refused request got 503 with Retry-After and an OpenAI error body;
  * the server's counters add up, no slot is left busy and the queue is empty;
  * /health answers, every slot still holds a full context, resident memory is back near its level
    before the load (within 5 %).
Used by tests/test_serve_load.py (small) and fuzz/load_test.py (big).
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fuzz.time_scale import scaled

CHILD = Path(__file__).with_name("serve_child.py")
# The wall-time budgets below (client timeouts, start and idle waits, the load's deadline) are a native run's,
# stretched by fuzz/time_scale.py (under qemu the server's compute runs 100-150x slower than natively: SmolLM2,
# 159-token prefill, 108 s vs 0.71 s, so fill_every_slot's 4 x 94-token prompts outlast a 120 s read timeout).
PROMPTS = (
    "The capital of France is",
    "def add(a, b):\n    return",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "Water boils at a temperature of",
    "A haiku about the sea:\n",
)


class ServerProcess:
    """`with ServerProcess(model, parallel=4, ...) as server:` a server in a child process on 127.0.0.1."""

    def __init__(self, model: str | Path, parallel: int = 4, queue: int = 4, ctx_size: int = 256,
                 threads: int = 1, start_timeout: float = scaled(120.0)):
        self.args = [sys.executable, str(CHILD), str(model), "--parallel", str(parallel), "--queue", str(queue),
                     "--ctx-size", str(ctx_size), "--threads", str(threads)]
        self.parallel, self.queue, self.ctx_size = parallel, queue, ctx_size
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = threading.Event()
        line: list[str] = []

        def read_url() -> None:
            line.append(self.proc.stdout.readline().strip())
            ready.set()

        threading.Thread(target=read_url, daemon=True).start()
        if not ready.wait(self.start_timeout) or not line[0].startswith("http://127.0.0.1:"):
            self.__exit__()
            raise RuntimeError(f"the server did not start (first line: {line[:1]})")
        self.url = line[0]
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()  # the child stops its server and exits
            self.proc.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        """Resident set size of the server process (VmRSS, KiB)."""
        with open(f"/proc/{self.pid}/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def metrics(self) -> dict:
        return httpx.get(self.url + "/metrics", timeout=scaled(10)).json()

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=scaled(10)).json()


# ---- one streamed request ------------------------------------------------------------------------------


@dataclass
class StreamResult:
    status: int
    text: str = ""
    finish_reason: str | None = None
    data_lines: int = 0
    done: bool = False          # saw the final "data: [DONE]"
    disconnected: bool = False  # the client hung up on purpose
    problem: str | None = None  # how the stream broke the format, if it did
    retry_after: str | None = None
    error_type: str | None = None


def stream_completion(client: httpx.Client, url: str, prompt: str | list[int], max_tokens: int,
                      hang_up_after: int | None = None, ignore_eos: bool = False) -> StreamResult:
    """POST /v1/completions with stream=true, temperature 0; reads the server-sent events and checks their
    form. hang_up_after=k closes the connection after k data lines (0: right after the headers)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": ignore_eos}
    with client.stream("POST", url + "/v1/completions", json=body) as r:
        result = StreamResult(r.status_code)
        if r.status_code != 200:
            r.read()
            result.retry_after = r.headers.get("retry-after")
            try:
                result.error_type = r.json()["error"]["type"]
            except (ValueError, KeyError, TypeError):
                result.problem = f"error body is not OpenAI's error JSON: {r.text[:200]!r}"
            return result
        if hang_up_after == 0:
            result.disconnected = True
            return result
        for line in r.iter_lines():
            if not line:
                continue
            if not line.startswith("data: "):
                result.problem = f"not an SSE data line: {line[:100]!r}"
                return result
            if result.done:
                result.problem = "data after [DONE]"
                return result
            result.data_lines += 1
            payload = line[len("data: "):]
            if payload == "[DONE]":
                result.done = True
            else:
                result.problem = _check_chunk(payload, result)
                if result.problem:
                    return result
            if hang_up_after is not None and result.data_lines >= hang_up_after:
                result.disconnected = True
                return result
        if not result.done:
            result.problem = "the stream ended without [DONE]"
        elif result.finish_reason is None:
            result.problem = "no chunk carried a finish_reason"
        return result


def _check_chunk(payload: str, result: StreamResult) -> str | None:
    try:
        chunk = json.loads(payload)
    except ValueError:
        return f"chunk is not JSON: {payload[:100]!r}"
    if "error" in chunk:
        return f"error event: {chunk['error']}"
    if chunk.get("object") != "text_completion":
        return f"chunk object is {chunk.get('object')!r}"
    choices = chunk.get("choices")
    if choices == [] and "usage" in chunk:
        return None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0].get("text"), str):
        return f"malformed choices: {choices!r}"
    if result.finish_reason is not None:
        return "a chunk after the one with finish_reason"
    result.text += choices[0]["text"]
    result.finish_reason = choices[0].get("finish_reason")
    if result.finish_reason is not None and "usage" not in chunk:
        return "the last chunk has no usage"
    return None


# ---- the load ------------------------------------------------------------------------------------------


@dataclass
class Reference:
    text: str
    data_lines: int  # chunks + [DONE] of the request alone


def reference_outputs(server: ServerProcess, prompts, max_tokens: int) -> dict[str, Reference]:
    """Each prompt as the server's only request."""
    out = {}
    with httpx.Client(timeout=scaled(120)) as client:
        for prompt in prompts:
            r = stream_completion(client, server.url, prompt, max_tokens)
            if r.status != 200 or r.problem or not r.done:
                raise RuntimeError(f"reference request for {prompt!r} failed: {r}")
            out[prompt] = Reference(r.text, r.data_lines)
    return out


@dataclass
class LoadReport:
    requests: int = 0         # requests finished (a request retried after 503s counts once)
    attempts: int = 0         # HTTP requests sent
    completed: int = 0        # complete stream, text equal to the reference
    disconnected: int = 0     # the client hung up on purpose
    rejected: int = 0         # 503 responses (with Retry-After and an error body)
    gave_up: int = 0          # requests whose every attempt got a 503
    mismatched: list[str] = field(default_factory=list)   # complete, but a different text
    broken: list[str] = field(default_factory=list)       # malformed stream or unexpected status
    seconds: float = 0.0

    @property
    def admitted(self) -> int:
        """Attempts the server took on (each ends served or cancelled)."""
        return self.attempts - self.rejected

    def add(self, other: LoadReport) -> None:
        for name in ("requests", "attempts", "completed", "disconnected", "rejected", "gave_up", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.mismatched += other.mismatched
        self.broken += other.broken


def classify(report: LoadReport, prompt: str, result: StreamResult, expected: dict[str, Reference],
             lock: threading.Lock, last_attempt: bool = True) -> None:
    """Count one attempt; a 503 that will be retried (last_attempt False) does not finish the request."""
    with lock:
        report.attempts += 1
        if result.status == 503:
            if result.retry_after and result.error_type == "server_overloaded" and not result.problem:
                report.rejected += 1
            else:
                report.broken.append(f"503 without Retry-After or error body: {result}")
            if last_attempt:
                report.requests += 1
                report.gave_up += 1
            return
        report.requests += 1
        if result.status != 200 or result.problem:
            report.broken.append(f"{prompt!r}: status {result.status}: {result.problem}")
        elif result.disconnected:
            report.disconnected += 1
        elif result.text != expected[prompt].text:
            report.mismatched.append(f"{prompt!r}: {result.text!r} != {expected[prompt].text!r}")
        else:
            report.completed += 1


def run_load(server: ServerProcess, expected: dict[str, Reference], n_requests: int, n_clients: int,
             max_tokens: int, hang_up_fraction: float = 0.2, seed: int = 0, max_seconds: float = scaled(600.0),
             retries: int = 0) -> LoadReport:
    """n_requests streamed requests from n_clients threads; about hang_up_fraction of them hang up at a
    random data line. A refused request (503) is sent again up to `retries` times after a short pause."""
    report, lock = LoadReport(), threading.Lock()
    counter = iter(range(n_requests))
    prompts = sorted(expected)
    deadline = time.monotonic() + max_seconds
    started = time.perf_counter()

    def client_loop(client_index: int) -> None:
        with httpx.Client(timeout=scaled(120)) as client:
            while time.monotonic() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                rng = random.Random(seed * 1_000_003 + i)
                prompt = rng.choice(prompts)
                hang_up = rng.randrange(expected[prompt].data_lines) if rng.random() < hang_up_fraction else None
                time.sleep(rng.uniform(0, 0.05))
                for attempt in range(retries + 1):
                    result = stream_completion(client, server.url, prompt, max_tokens, hang_up_after=hang_up)
                    last = result.status != 503 or attempt == retries or time.monotonic() > deadline
                    classify(report, prompt, result, expected, lock, last_attempt=last)
                    if last:
                        break
                    time.sleep(rng.uniform(0.05, 0.2))

    with ThreadPoolExecutor(n_clients) as pool:
        for f in [pool.submit(client_loop, c) for c in range(n_clients)]:
            f.result()
    report.seconds = time.perf_counter() - started
    return report


def burst(server: ServerProcess, expected: dict[str, Reference], size: int, max_tokens: int) -> LoadReport:
    """`size` requests released at the same instant (beyond slots + queue: the surplus must get 503)."""
    report, lock = LoadReport(), threading.Lock()
    gate = threading.Barrier(size)
    prompts = sorted(expected)
    started = time.perf_counter()

    def one(i: int) -> None:
        prompt = prompts[i % len(prompts)]
        with httpx.Client(timeout=scaled(120)) as client:
            gate.wait()
            classify(report, prompt, stream_completion(client, server.url, prompt, max_tokens), expected, lock)

    with ThreadPoolExecutor(size) as pool:
        for f in [pool.submit(one, i) for i in range(size)]:
            f.result()
    report.seconds = time.perf_counter() - started
    return report


def wait_idle(server: ServerProcess, timeout: float = scaled(30.0)) -> dict:
    """Metrics once no slot is busy and the queue is empty (a cancelled job frees its slot after one tick)."""
    deadline = time.monotonic() + timeout
    while True:
        m = server.metrics()
        if (m["active_slots"] == 0 and m["queue_length"] == 0) or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def settled_rss_kib(server: ServerProcess, samples: int = 3, pause: float = 0.1) -> int:
    """The lowest of a few RSS readings a moment apart (the event loop frees buffers lazily)."""
    readings = []
    for _ in range(samples):
        time.sleep(pause)
        readings.append(server.rss_kib())
    return min(readings)


def fill_every_slot(server: ServerProcess, n_vocab_hint: int = 1000, max_tokens: int = 2) -> list[StreamResult]:
    """One request per slot at once, each needing the whole context (prompt of n_ctx - max_tokens token ids):
    all must succeed, so no slot lost any of its KV cache to an earlier request."""
    n_prompt = server.ctx_size - max_tokens
    rng = random.Random(7)
    results: list[StreamResult] = [None] * server.parallel  # type: ignore[list-item]
    gate = threading.Barrier(server.parallel)

    def one(i: int) -> None:
        prompt = [rng.randrange(100, n_vocab_hint) for _ in range(n_prompt)]
        with httpx.Client(timeout=scaled(120)) as client:
            gate.wait()
            results[i] = stream_completion(client, server.url, prompt, max_tokens, ignore_eos=True)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(server.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# ---- faults ---------------------------------------------------------------------------------------------


def fault_requests(n_ctx: int) -> list[tuple[str, dict | bytes | None]]:
    """(name, JSON body, raw bytes or None for the chat case) of requests the server must refuse with a 4xx."""
    long_prompt = " ".join(f"word{i}" for i in range(n_ctx * 2))
    base = {"prompt": "Hello", "max_tokens": 4}
    cases: list[tuple[str, dict | bytes | None]] = [
        ("prompt longer than the context", {**base, "prompt": long_prompt}),
        ("prompt longer than the context, streamed", {**base, "prompt": long_prompt, "stream": True}),
        ("prompt of token ids longer than the context", {**base, "prompt": list(range(1, n_ctx + 2))}),
        ("huge max_tokens", {**base, "max_tokens": 10**9}),
        ("max_tokens beyond 64 bits", {**base, "max_tokens": 2**70}),
        ("zero max_tokens", {**base, "max_tokens": 0}),
        ("negative temperature", {**base, "temperature": -1}),
        ("NaN temperature", b'{"prompt": "Hello", "max_tokens": 4, "temperature": NaN}'),
        ("infinite top_p", b'{"prompt": "Hello", "max_tokens": 4, "top_p": Infinity}'),
        ("negative top_p", {**base, "top_p": -0.5}),
        ("negative top_k", {**base, "top_k": -3}),
        ("negative min_p", {**base, "min_p": -0.1}),
        ("negative repeat_penalty", {**base, "repeat_penalty": -1.0}),
        ("negative seed", {**base, "seed": -1}),
        ("token id outside the vocabulary", {**base, "prompt": [1, 2, 10**9]}),
        ("negative token id", {**base, "prompt": [1, -5]}),
        ("invalid UTF-8 body", b'{"prompt": "caf\xc3\x28 \xff\xfe", "max_tokens": 4}'),
        ("truncated JSON", b'{"prompt": "Hello", "max_tok'),
        ("JSON array body", b'[1, 2, 3]'),
        ("chat with no messages", None),
    ]
    return cases


def send_fault(client: httpx.Client, url: str, name: str, body: dict | bytes | None) -> httpx.Response:
    if body is None:  # the chat endpoint's own validation
        return client.post(url + "/v1/chat/completions", json={"messages": [], "max_tokens": 4})
    if isinstance(body, bytes):
        return client.post(url + "/v1/completions", content=body, headers={"Content-Type": "application/json"})
    return client.post(url + "/v1/completions", json=body)
