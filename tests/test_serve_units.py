"""Server parts without a model: stop-string holdback, SSE framing, request validation, OpenAPI, and the
scheduler driven by a tiny fake backend (counting tokens) so queueing, cancellation and prefix reuse are
checked exactly and fast."""
from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest

from onewell.runtime.sampling import SamplingParams
from onewell.serve import openai_schema as schema
from onewell.serve.openapi import build_openapi
from onewell.serve.scheduler import (Chunk, Done, Failed, GenerationRequest, QueueFullError, Scheduler,
                                     step_sequences)
from onewell.serve.streaming import SSE_DONE, StopHoldback, TokenLogprob, sse


def entry(token: str) -> TokenLogprob:
    return TokenLogprob(token, -1.0, tuple(token.encode()))


# ----------------------------------------------------------------------------------------------------------
# StopHoldback


def feed(holdback: StopHoldback, pieces: list[str]) -> tuple[str, list[str]]:
    text, tokens = "", []
    for piece in pieces:
        r = holdback.push(piece, entry(piece))
        text += r.text
        tokens += [e.token for e in r.logprobs]
    if not holdback.stopped:
        r = holdback.finish()
        text += r.text
        tokens += [e.token for e in r.logprobs]
    return text, tokens


def test_holdback_stop_split_over_tokens_is_never_emitted():
    holdback = StopHoldback(["END"])
    released = []
    for piece in ["Hello", " E", "N", "D", " after"]:
        released.append(holdback.push(piece, entry(piece)).text)
    assert "".join(released) == "Hello "
    assert holdback.stopped
    # nothing of "END" was ever out, not even while it was undecided
    assert all("E" not in r and "N" not in r for r in released)


def test_holdback_false_alarm_is_released_with_its_tokens():
    text, tokens = feed(StopHoldback(["END"]), ["a", " E", "Nd?", "x"])
    assert text == "a ENd?x" and tokens == ["a", " E", "Nd?", "x"]
    text, tokens = feed(StopHoldback(["stop"]), ["ab", "st"])  # held "st" is released at the end
    assert text == "abst" and tokens == ["ab", "st"]


def test_holdback_logprobs_follow_text():
    holdback = StopHoldback(["\n\n"])
    r1 = holdback.push("Hi", entry("Hi"))
    r2 = holdback.push("\n", entry("\n"))  # could start the stop: held, and so is its logprob
    assert (r1.text, [e.token for e in r1.logprobs]) == ("Hi", ["Hi"])
    assert (r2.text, r2.logprobs) == ("", [])
    r3 = holdback.push("\nmore", entry("\nmore"))
    assert holdback.stopped and r3.text == ""
    # the token that carried the first newline was not released, so neither is its logprob
    assert r3.logprobs == []


def test_holdback_partial_token_before_stop_keeps_its_logprob():
    text, tokens = feed(StopHoldback(["###"]), ["one", " two###three"])
    assert text == "one two" and tokens == ["one", " two###three"]


def test_holdback_without_stop_strings_passes_everything():
    text, tokens = feed(StopHoldback([]), ["a", "", "b"])
    assert text == "ab" and tokens == ["a", "", "b"]


# ----------------------------------------------------------------------------------------------------------
# SSE and schema


def test_sse_frames_are_single_line_json():
    frame = sse({"text": "line1\nline2 \u00e9"})
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2
    assert json.loads(frame[6:].decode()) == {"text": "line1\nline2 \u00e9"}
    assert SSE_DONE == b"data: [DONE]\n\n"


def chat(**extra) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize("bad", [
    {"temperature": float("nan")}, {"temperature": -0.5}, {"temperature": float("inf")}, {"top_p": 0},
    {"top_p": 1.5}, {"max_tokens": 0}, {"max_tokens": -3}, {"seed": -1}, {"n": 2}, {"top_k": -1},
    {"presence_penalty": 2.5}, {"frequency_penalty": float("nan")}, {"tools": [{"type": "function"}]},
    {"top_logprobs": 3}, {"logit_bias": {"-1": 1}}, {"store": True}, {"modalities": ["audio"]},
    {"tool_choice": "required"}, {"response_format": {"type": "json_schema"}},
    {"top_logprobs": 99, "logprobs": True}, {"stop": ["x"] * 17}, {"messages": []},
    {"messages": [{"role": "wizard", "content": "x"}]}, {"repeat_penalty": 0},
])
def test_chat_request_rejects(bad):
    with pytest.raises(ValueError):
        schema.ChatCompletionRequest.model_validate(chat(**bad))


def test_chat_request_accepts_openai_shapes():
    req = schema.ChatCompletionRequest.model_validate(chat(
        messages=[{"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
                  {"role": "user", "content": "hi"}],
        max_completion_tokens=5, stop="\n", user="someone", presence_penalty=0, logprobs=True, top_logprobs=2))
    assert req.messages[0].for_template() == {"role": "system", "content": "be brief"}
    assert req.token_limit() == 5 and req.stop_strings() == ["\n"] and req.logprobs_count() == 2
    assert schema.ChatCompletionRequest.model_validate(chat()).logprobs_count() is None


def test_completion_request_prompt_forms():
    assert schema.CompletionRequest.model_validate({"prompt": "x"}).max_tokens == 16
    assert schema.CompletionRequest.model_validate({"prompt": [1, 2, 3]}).prompt == [1, 2, 3]
    for bad in ({"prompt": ["a", "b"]}, {"prompt": []}, {"prompt": "x", "echo": True}, {"prompt": "x", "logprobs": 6}):
        with pytest.raises(ValueError):
            schema.CompletionRequest.model_validate(bad)


def test_openapi_document_references_resolve():
    doc = build_openapi()
    schemas = doc["components"]["schemas"]
    text = json.dumps(doc)
    for ref in set(part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]):
        assert ref in schemas, ref
    assert {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"} <= set(doc["paths"])


# ----------------------------------------------------------------------------------------------------------
# Scheduler with a fake engine: token t is always followed by t + 1 (mod V); token 0 ends generation.

V = 50


class CountingBackend:
    def __init__(self, n_ctx: int = 64, delay: threading.Event | None = None, fail_on: int | None = None):
        self.n_ctx, self.n_past = n_ctx, 0
        self.fed: list[int] = []
        self.gate = delay
        self.fail_on = fail_on

    def forward(self, tokens, all_logits=False):
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail_on is not None and self.fail_on in tokens:
            raise RuntimeError("boom")
        self.fed += list(tokens)
        self.n_past += len(tokens)
        logits = np.zeros(V, dtype=np.float32)
        logits[(tokens[-1] + 1) % V] = 10.0
        return logits

    def truncate(self, n_past):
        assert 0 <= n_past <= self.n_past
        self.n_past = n_past

    def reset(self):
        self.n_past = 0


class DigitTokenizer:
    eog_ids = frozenset({0})

    def is_control(self, token_id):
        return token_id == 0

    def token_bytes(self, token_id):
        return f"<{token_id}>".encode()


def request(prompt, max_tokens=3, stop=(), logprobs=None) -> GenerationRequest:
    return GenerationRequest(list(prompt), max_tokens, SamplingParams(temperature=0), stop=stop, logprobs=logprobs)


async def drain(job) -> tuple[str, list]:
    text, events = "", []
    while True:
        event = await asyncio.wait_for(job.events.get(), 5)
        events.append(event)
        if isinstance(event, Chunk):
            text += event.release.text
        else:
            return text, events


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_scheduler_generates_and_finishes_by_length_and_eog():
    async def main():
        s = Scheduler([CountingBackend()], DigitTokenizer(), queue_capacity=2)
        s.start()
        text, events = await drain(s.submit(request([5, 6], max_tokens=3)))
        assert text == "<7><8><9>" and events[-1].finish_reason == "length"
        assert events[-1].usage.completion_tokens == 3 and events[-1].usage.prompt_tokens == 2
        text, events = await drain(s.submit(request([47], max_tokens=10)))  # 48, 49, then 0 = end
        assert text == "<48><49>" and events[-1].finish_reason == "stop"
        assert events[-1].usage.completion_tokens == 3
        m = s.metrics()
        assert m["requests_served"] == 2 and m["active_slots"] == 0 and m["tokens_generated"] == 6
        await s.stop()

    run(main())


def test_scheduler_stop_string_and_logprobs():
    async def main():
        s = Scheduler([CountingBackend()], DigitTokenizer())
        s.start()
        text, events = await drain(s.submit(request([1], max_tokens=9, stop=["<4>"], logprobs=1)))
        assert text == "<2><3>" and events[-1].finish_reason == "stop"
        tokens = [e.token for ev in events if isinstance(ev, Chunk) for e in ev.release.logprobs]
        assert tokens[:2] == ["<2>", "<3>"]
        first = next(ev for ev in events if isinstance(ev, Chunk)).release.logprobs[0]
        assert first.top[0].token == "<2>" and first.logprob == pytest.approx(first.top[0].logprob)
        assert first.logprob == pytest.approx(10 - np.log(np.exp(10) + V - 1), abs=1e-6)
        await s.stop()

    run(main())


def test_scheduler_prefix_cache_feeds_only_the_new_tokens():
    async def main():
        backends = [CountingBackend(), CountingBackend()]
        s = Scheduler(backends, DigitTokenizer())
        s.start()
        await drain(s.submit(request([10, 11, 12, 13], max_tokens=2)))      # holds 10 11 12 13 14 (15 unfed)
        busy = [b for b in backends if b.fed]
        assert len(busy) == 1
        _, events = await drain(s.submit(request([10, 11, 12, 13, 14, 15, 30], max_tokens=1)))
        assert events[-1].usage.cached_tokens == 5
        assert busy[0].fed[-2:] == [15, 30]  # the same slot was chosen and fed just the new part
        assert s.metrics()["prompt_tokens_cached"] == 5
        await s.stop()

    run(main())


def test_scheduler_queue_full_and_cancel_frees_slot():
    async def main():
        gate = threading.Event()
        s = Scheduler([CountingBackend(delay=gate)], DigitTokenizer(), queue_capacity=1)
        s.start()
        first = s.submit(request([1], max_tokens=40))
        await asyncio.sleep(0.05)            # admitted; its first forward waits at the gate
        second = s.submit(request([2], max_tokens=1))
        with pytest.raises(QueueFullError):
            s.submit(request([3]))
        assert s.metrics()["requests_rejected"] == 1 and s.metrics()["queue_length"] == 1
        first.cancel()
        gate.set()
        text, events = await drain(second)   # the slot went to the waiting request
        assert text == "<3>" and isinstance(events[-1], Done)
        m = s.metrics()
        assert m["requests_cancelled"] == 1 and m["active_slots"] == 0 and m["requests_served"] == 1
        await s.stop()

    run(main())


def test_scheduler_queue_bound_counts_free_slots_not_yet_taken():
    async def main():
        s = Scheduler([CountingBackend()], DigitTokenizer(), queue_capacity=0)
        s.start()
        first = s.submit(request([1], max_tokens=1))  # same loop turn: the slot is free but not yet taken
        with pytest.raises(QueueFullError):
            s.submit(request([2], max_tokens=1))
        text, _ = await drain(first)
        assert text == "<2>"
        await s.stop()
        with pytest.raises(QueueFullError, match="shutting down"):
            s.submit(request([3]))

    run(main())


def test_scheduler_counts_a_hung_up_slot_as_free_at_once():
    async def main():
        gate = threading.Event()
        s = Scheduler([CountingBackend(delay=gate)], DigitTokenizer(), queue_capacity=0)
        s.start()
        first = s.submit(request([1], max_tokens=40))
        await asyncio.sleep(0.05)            # admitted; its forward waits at the gate
        with pytest.raises(QueueFullError):  # the only slot is busy and there is no queue
            s.submit(request([2], max_tokens=1))
        first.cancel()                       # the client hangs up while the tick still runs
        second = s.submit(request([2], max_tokens=1))  # not refused: that slot is free at the next turn
        gate.set()
        text, events = await drain(second)
        assert text == "<3>" and isinstance(events[-1], Done)
        assert s.metrics()["requests_rejected"] == 1
        await s.stop()

    run(main())


def test_scheduler_failing_slot_does_not_stop_the_others():
    async def main():
        s = Scheduler([CountingBackend(fail_on=20), CountingBackend(fail_on=20)], DigitTokenizer())
        s.start()
        good = s.submit(request([30], max_tokens=3))
        bad = s.submit(request([20], max_tokens=3))
        (_, bad_events), (text, _) = await asyncio.gather(drain(bad), drain(good))
        assert isinstance(bad_events[-1], Failed) and "internal error" in bad_events[-1].message
        assert text == "<31><32><33>"
        text, _ = await drain(s.submit(request([40], max_tokens=1)))  # both slots still serve
        assert text == "<41>"
        m = s.metrics()
        assert m["active_slots"] == 0 and m["requests_failed"] == 1 and m["requests_served"] == 2
        await s.stop()

    run(main())


def test_step_sequences_returns_exceptions_in_place():
    ok, broken = CountingBackend(), CountingBackend(fail_on=7)
    out = step_sequences([ok, broken], [[1], [7]])
    assert isinstance(out[0], np.ndarray) and int(np.argmax(out[0])) == 2
    assert isinstance(out[1], RuntimeError)


def test_non_loopback_without_key_warns(capsys, monkeypatch):
    from onewell.serve import app as serve_app

    assert serve_app._is_loopback("127.0.0.1") and serve_app._is_loopback("::1")
    assert serve_app._is_loopback("localhost") and not serve_app._is_loopback("0.0.0.0")
    monkeypatch.setattr("onewell.load", lambda *a, **k: (_ for _ in ()).throw(SystemExit(7)))
    with pytest.raises(SystemExit):
        serve_app.main(["some-model", "--host", "0.0.0.0"])
    assert "without --api-key" in capsys.readouterr().err
