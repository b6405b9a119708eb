"""`onewell serve MODEL`: an OpenAI-compatible HTTP server (Starlette + uvicorn) with a web chat page.

Endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions (both also as server-sent
events with "stream": true), GET /health, GET /metrics (JSON, or Prometheus text: serve/prometheus.py),
GET /openapi.json, and the chat page at /. With --replicas it runs on Ray Serve instead (serve/ray_*.py).

Requests are validated (openai_schema.py), turned into token ids on a worker thread, and handed to the
scheduler (scheduler.py), which runs up to --parallel generations at once and queues up to --queue more.
Every error reaches the client as OpenAI's {"error": {...}} JSON; unexpected ones are logged with their
traceback and answered with a short 500, never the traceback itself.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import logging
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from onewell.errors import ContextOverflowError, OnewellError
from onewell.runtime.generate import check_fits
from onewell.runtime.sampling import SamplingParams
from onewell.serve import openai_schema as schema
from onewell.serve.embeddings import EmbeddingRequest, EmbeddingScheduler, encode_vector
from onewell.serve.arg_types import nonnegative_int, positive_float, positive_int
from onewell.serve.limits import BodyTimeoutMiddleware, PrepareGate, ServerLimits, uvicorn_config
from onewell.serve.openapi import build_openapi
from onewell.serve.scheduler import (PREFILL_CHUNK, Chunk, Done, Failed, GenerationRequest, Job, QueueFullError,
                                     Scheduler, Usage)
from onewell.serve.security import (HostAllowList, HostAllowListMiddleware, JsonBodyMiddleware, allowed_hosts_for,
                                    check_json_depth)
from onewell.serve.slot_backends import slot_backends
from onewell.serve.streaming import SSE_DONE, TokenLogprob, sse
from onewell.serve.structured_replies import (ReplyShaper, StructuredRequestError, constraint_for, request_grammar,
                                              tool_mode)

log = logging.getLogger("onewell.serve")

STATIC_DIR = Path(__file__).parent / "static"
MAX_BODY_BYTES = 8 << 20
RETRY_AFTER_SECONDS = 2
PUBLIC_PATHS = ("/", "/health", "/openapi.json", "/favicon.ico")  # and /static/...: no API key needed
CLIENT_KEY = "onewell.api_key"  # scope entry: which API key a request came with (an index, never the key)
PAGE_HEADERS = {
    # The page loads nothing from elsewhere; say so, so injected markup could not either.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


class ApiError(Exception):
    """An error answered as OpenAI's {"error": {...}} with an HTTP status."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = headers or {}


def error_response(status: int, message: str, type: str = "invalid_request_error", code: str | None = None,
                   param: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


@dataclass
class ServerState:
    model: Any  # onewell.api.Model
    scheduler: Scheduler
    model_name: str
    created: int
    gate: PrepareGate
    share_prompt_cache: bool = False
    requests_invalid: int = 0

    @functools.cached_property
    def longest_token_bytes(self) -> int:
        tok = self.model.tokenizer
        return max(len(tok.token_bytes(i)) for i in range(tok.n_vocab))


# ----------------------------------------------------------------------------------------------------------
# Request handling helpers


async def read_json(request: Request) -> dict[str, Any]:
    """The body as a JSON object (its Content-Type was checked by security.JsonBodyMiddleware)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > MAX_BODY_BYTES:
                raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    except ClientDisconnect:  # gone before the body arrived: nobody reads a reply
        raise ApiError(499, "client closed the request") from None
    try:
        check_json_depth(bytes(body), request.app.state.limits.max_json_depth)
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def parse(model: type[BaseModel], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors()[:5]:
            where = ".".join(str(part) for part in err["loc"]) or "body"
            problems.append(f"{where}: {err['msg']}")
        first = ".".join(str(p) for p in e.errors()[0]["loc"]) if e.errors() else None
        raise ApiError(400, "invalid request: " + "; ".join(problems), param=first) from None


def chat_prompt_ids(model: Any, req: schema.ChatCompletionRequest) -> list[int]:
    tools = [t.for_template() for t in req.active_tools()] or None
    return model.tokenize_chat([m.for_template() for m in req.messages], tools=tools)


def completion_prompt_ids(model: Any, req: schema.CompletionRequest) -> list[int]:
    prompt = req.prompt
    tok = model.tokenizer
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        bad = [t for t in prompt if not 0 <= t < tok.n_vocab]
        if bad:
            raise ApiError(400, f"token id {bad[0]} is outside the vocabulary [0, {tok.n_vocab})", param="prompt")
        return list(prompt)
    text = prompt[0] if isinstance(prompt, list) else prompt
    return tok.encode(text, add_bos=tok.add_bos_token, parse_special=True)


def prompt_text_bytes(req) -> int:
    """UTF-8 bytes of the text the request brings (a lower bound of what will be tokenized: a chat template
    only adds text); token-id prompts count zero."""
    if isinstance(req, schema.ChatCompletionRequest):
        return sum(len(m.text().encode("utf-8", "surrogatepass")) for m in req.messages)
    prompt = req.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return 0
    text = prompt[0] if isinstance(prompt, list) else prompt
    return len(text.encode("utf-8", "surrogatepass"))


def refuse_if_surely_too_long(state: ServerState, req) -> None:
    """No token spans more than the longest token's bytes, so text longer than n_ctx x that cannot fit the
    context however it tokenizes: refuse it before spending CPU (seconds for megabytes) on tokenizing it."""
    longest = state.longest_token_bytes
    n_bytes = prompt_text_bytes(req)
    if n_bytes > state.scheduler.n_ctx * longest:
        raise ApiError(400, f"the prompt has {n_bytes} bytes of text, more than the context of "
                            f"{state.scheduler.n_ctx} tokens can hold (a token covers at most {longest} bytes)",
                       code="context_length_exceeded", param="messages" if isinstance(
                           req, schema.ChatCompletionRequest) else "prompt")


async def prompt_ids_for(state: ServerState, build, req) -> list[int]:
    """Template rendering and tokenization run on the prepare threads (limits.PrepareGate): a long prompt must
    not stall the loop, and preparing requests count against the queue."""
    refuse_if_surely_too_long(state, req)
    try:
        return await state.gate.run(build, state.model, req)
    except QueueFullError as e:
        raise _overloaded(e) from None
    except ApiError:
        raise
    except (OnewellError, ValueError) as e:  # no chat template, a template that rejects the messages, ...
        raise ApiError(400, str(e)) from None


def cache_owner(state: ServerState, request: Request) -> str | None:
    """Whose KV cache prefixes a request may reuse: its API key's (None: everyone's)."""
    return None if state.share_prompt_cache else request.scope.get(CLIENT_KEY)


def owned(request_: GenerationRequest, state: ServerState, request: Request) -> GenerationRequest:
    request_.cache_owner = cache_owner(state, request)
    return request_


def generation_request(state: ServerState, req, prompt_ids: list[int], owner: str | None = None) -> GenerationRequest:
    n_ctx = state.scheduler.n_ctx
    max_tokens = req.token_limit()
    if max_tokens is None:  # as much as the context has room for
        max_tokens = max(n_ctx - len(prompt_ids), 1)
    try:
        check_fits(n_ctx, len(prompt_ids), max_tokens)
    except ContextOverflowError as e:
        raise ApiError(400, str(e), code="context_length_exceeded", param="max_tokens") from None
    except ValueError as e:
        raise ApiError(400, str(e)) from None
    try:
        bias = req.logit_bias_ids()
        outside = [t for t in bias if t >= state.model.tokenizer.n_vocab]
        if outside:
            raise ApiError(400, f"logit_bias names token {outside[0]}, outside the vocabulary "
                                f"[0, {state.model.tokenizer.n_vocab})", param="logit_bias")
        sampling = SamplingParams(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, min_p=req.min_p,
                                  repeat_penalty=req.repeat_penalty, seed=req.seed,
                                  presence_penalty=req.presence_penalty or 0.0,
                                  frequency_penalty=req.frequency_penalty or 0.0, logit_bias=bias)
    except ValueError as e:
        raise ApiError(400, str(e)) from None
    return GenerationRequest(prompt_ids=prompt_ids, max_tokens=max_tokens, sampling=sampling,
                             stop=req.stop_strings(), logprobs=req.logprobs_count(), ignore_eos=req.ignore_eos,
                             cache_owner=owner)


def _overloaded(e: QueueFullError) -> ApiError:
    return ApiError(503, str(e), type="server_overloaded", code="queue_full",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def submit(state: ServerState, request: GenerationRequest) -> Job:
    try:
        return state.scheduler.submit(request)
    except QueueFullError as e:
        raise _overloaded(e) from None


def usage_json(u: Usage) -> dict[str, Any]:
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}


def timings_json(u: Usage) -> dict[str, float]:
    """llama.cpp-style timings (not part of OpenAI's schema; clients ignore them): the web page shows tok/s."""
    evaluated = u.prompt_tokens - u.cached_tokens
    return {
        "prompt_n": evaluated, "prompt_ms": round(u.prompt_seconds * 1e3, 3),
        "prompt_per_second": round(evaluated / u.prompt_seconds, 3) if u.prompt_seconds > 0 else 0.0,
        "predicted_n": u.completion_tokens, "predicted_ms": round(u.gen_seconds * 1e3, 3),
        # the first token's time is in prompt_ms, so the rate is over the tokens after it
        "predicted_per_second": round((u.completion_tokens - 1) / u.gen_seconds, 3) if u.gen_seconds > 0 else 0.0,
    }


def completion_logprobs(entries: list[TokenLogprob], offset: int) -> dict[str, Any]:
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e.token)
    return {"tokens": [e.token for e in entries], "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{alt.token: alt.logprob for alt in e.top} for e in entries], "text_offset": offsets}


async def events_until_done(job: Job, request: Request | None) -> AsyncIterator[Chunk | Done | Failed]:
    """The job's events up to Done/Failed. With `request` (non-streamed replies), also watches the
    connection and ends early when the client leaves; streamed replies are cancelled by Starlette.
    Leaving (either way) cancels the job. Use under contextlib.aclosing so that happens at once."""
    disconnect = asyncio.ensure_future(_client_gone(request)) if request is not None else None
    getter: asyncio.Future | None = None
    try:
        while True:
            if disconnect is None:
                event = await job.events.get()
            else:
                getter = asyncio.ensure_future(job.events.get())
                done, _ = await asyncio.wait({getter, disconnect}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    return
                event, getter = getter.result(), None
            yield event
            if isinstance(event, (Done, Failed)):
                return
    finally:
        for task in (getter, disconnect):
            if task is not None:
                task.cancel()
        job.cancel()  # no-op once finished


async def _client_gone(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


# ----------------------------------------------------------------------------------------------------------
# Endpoints


def _state(request: Request) -> ServerState:
    return request.app.state.onewell


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


async def structured_request(state: ServerState, req, prompt_ids: list[int], mode=None) -> GenerationRequest:
    """generation_request plus the grammar constraint the request asks for (400 when it cannot be used)."""
    try:
        grammar = request_grammar(req, mode)
        generation = generation_request(state, req, prompt_ids)
        generation.constraint = await constraint_for(state.model, grammar)
    except StructuredRequestError as e:
        raise ApiError(400, str(e), param=e.param) from None
    return generation


def refuse_embedding_model(state: ServerState, endpoint: str) -> None:
    if getattr(state.model, "is_embedding", False):
        raise ApiError(400, f"{state.model_name} is an embedding model: it answers /v1/embeddings, not {endpoint}",
                       code="model_not_generative", param="model")


async def embeddings(request: Request) -> Response:
    state = _state(request)
    req = parse(EmbeddingRequest, await read_json(request))
    if not getattr(state.model, "is_embedding", False):
        raise ApiError(400, f"{state.model_name} is a generative model: /v1/embeddings needs an embedding model "
                       f"(e.g. nomic-embed-text-v1.5)", code="model_not_embedding", param="model")
    texts, ids = req.batches()
    try:
        vectors, n_tokens = await state.scheduler.embed(texts, ids, req.dimensions)
    except QueueFullError as e:
        raise _overloaded(e) from None
    except ValueError as e:   # a token id outside the vocabulary, an input longer than the context, dimensions
        raise ApiError(400, str(e), param="dimensions" if "dimensions" in str(e) else "input") from None
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, req.encoding_format)}
            for i, v in enumerate(vectors)]
    return JSONResponse({"object": "list", "data": data, "model": state.model_name,
                         "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}})


async def chat_completions(request: Request) -> Response:
    state = _state(request)
    refuse_embedding_model(state, "/v1/chat/completions")
    req = parse(schema.ChatCompletionRequest, await read_json(request))
    try:
        mode = tool_mode(state.model, req)
    except StructuredRequestError as e:
        raise ApiError(400, str(e), param=e.param) from None
    prompt_ids = await prompt_ids_for(state, chat_prompt_ids, req)
    job = submit(state, owned(await structured_request(state, req, prompt_ids, mode), state, request))
    shaper = ReplyShaper(mode)
    head = {"id": _new_id("chatcmpl"), "created": int(time.time()), "model": state.model_name}
    want_logprobs = req.logprobs

    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        def chunk(delta: dict, finish: str | None = None, logprobs=None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
            return sse({**head, "object": "chat.completion.chunk", "choices": [choice]})

        async def body() -> AsyncIterator[bytes]:
            yield chunk({"role": "assistant", "content": ""})
            async for event in events_until_done(job, None):  # ends at Done/Failed; cancelled with the stream
                if isinstance(event, Chunk):
                    lp = {"content": [e.as_openai() for e in event.release.logprobs]} if want_logprobs else None
                    deltas = shaper.push(event.release.text)
                    if lp is not None or not deltas:  # logprobs travel even when the text is held back
                        deltas = deltas or [{}]
                    for i, delta in enumerate(deltas):
                        yield chunk(delta, logprobs=lp if i == 0 else None)
                elif isinstance(event, Done):
                    for delta in shaper.finish():
                        yield chunk(delta)
                    reason = shaper.finish_reason(event.finish_reason)
                    last = {**head, "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": reason,
                                         "logprobs": None}],
                            "timings": timings_json(event.usage)}
                    if include_usage:  # OpenAI's form: usage in an extra chunk with no choices
                        yield sse(last)
                        yield sse({**head, "object": "chat.completion.chunk", "choices": [],
                                   "usage": usage_json(event.usage)})
                    else:
                        yield sse({**last, "usage": usage_json(event.usage)})
                else:
                    yield sse({"error": {"message": event.message, "type": "server_error", "param": None,
                                         "code": None}})
            yield SSE_DONE

        return event_stream(body(), job)

    text, entries, done = await collect(job, request)
    message = shaper.message(text)
    logprobs = {"content": [e.as_openai() for e in entries]} if want_logprobs else None
    return JSONResponse({**head, "object": "chat.completion",
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": shaper.finish_reason(done.finish_reason),
                                      "logprobs": logprobs}],
                         "usage": usage_json(done.usage), "timings": timings_json(done.usage)})


async def completions(request: Request) -> Response:
    state = _state(request)
    refuse_embedding_model(state, "/v1/completions")
    req = parse(schema.CompletionRequest, await read_json(request))
    prompt_ids = await prompt_ids_for(state, completion_prompt_ids, req)
    job = submit(state, owned(await structured_request(state, req, prompt_ids), state, request))
    head = {"id": _new_id("cmpl"), "object": "text_completion", "created": int(time.time()),
            "model": state.model_name}
    want_logprobs = req.logprobs is not None

    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        def chunk(text: str, finish: str | None = None, logprobs=None, **extra) -> bytes:
            return sse({**head, "choices": [{"index": 0, "text": text, "finish_reason": finish,
                                             "logprobs": logprobs}], **extra})

        async def body() -> AsyncIterator[bytes]:
            offset = 0
            async for event in events_until_done(job, None):
                if isinstance(event, Chunk):
                    r = event.release
                    lp = completion_logprobs(r.logprobs, offset) if want_logprobs else None
                    offset += sum(len(e.token) for e in r.logprobs)
                    yield chunk(r.text, logprobs=lp)
                elif isinstance(event, Done):
                    timings = timings_json(event.usage)
                    if include_usage:
                        yield chunk("", event.finish_reason, timings=timings)
                        yield sse({**head, "choices": [], "usage": usage_json(event.usage)})
                    else:
                        yield chunk("", event.finish_reason, usage=usage_json(event.usage), timings=timings)
                else:
                    yield sse({"error": {"message": event.message, "type": "server_error", "param": None,
                                         "code": None}})
            yield SSE_DONE

        return event_stream(body(), job)

    text, entries, done = await collect(job, request)
    logprobs = completion_logprobs(entries, 0) if want_logprobs else None
    return JSONResponse({**head, "choices": [{"index": 0, "text": text, "finish_reason": done.finish_reason,
                                              "logprobs": logprobs}],
                         "usage": usage_json(done.usage), "timings": timings_json(done.usage)})


async def collect(job: Job, request: Request) -> tuple[str, list[TokenLogprob], Done]:
    parts: list[str] = []
    entries: list[TokenLogprob] = []
    async with contextlib.aclosing(events_until_done(job, request)) as events:
        async for event in events:
            if isinstance(event, Chunk):
                parts.append(event.release.text)
                entries += event.release.logprobs
            elif isinstance(event, Done):
                return "".join(parts), entries, event
            else:
                raise ApiError(event.status, event.message, type="server_error")
    raise ApiError(499, "client closed the request")  # nobody is left to read this


def event_stream(body: AsyncIterator[bytes], job: Job) -> StreamingResponse:
    async def guarded() -> AsyncIterator[bytes]:
        try:
            async for piece in body:
                yield piece
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception:  # headers are sent: report in-band, then end the stream properly
            log.exception("error while streaming a reply")
            yield sse({"error": {"message": "internal server error", "type": "server_error", "param": None,
                                 "code": None}})
            yield SSE_DONE
        finally:
            job.cancel()  # the client left (Starlette cancels this stream) or the job is over (a no-op)
            await body.aclose()

    return StreamingResponse(guarded(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def list_models(request: Request) -> Response:
    state = _state(request)
    cfg = state.model.spec.config
    card = {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "onewell",
            "meta": {"n_ctx": state.scheduler.n_ctx, "slots": len(state.scheduler.slots), "arch": cfg.arch,
                     "kv_type": getattr(state.model.backend, "kv_type", None),
                     "n_vocab": cfg.n_vocab, "chat_template": bool(state.model.tokenizer.chat_template)}}
    return JSONResponse({"object": "list", "data": [card]})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def metrics_json(state: ServerState) -> dict[str, int]:
    return {**state.scheduler.metrics(), "requests_invalid": state.requests_invalid}


async def metrics(request: Request) -> Response:
    state = _state(request)
    from onewell.serve.prometheus import wants_prometheus  # plain module; prometheus_client only on demand

    if wants_prometheus(request.headers.get("accept", ""), request.query_params.get("format")):
        from onewell.serve.prometheus import CONTENT_TYPE_LATEST, render

        return Response(render([({}, metrics_json(state))]), media_type=CONTENT_TYPE_LATEST)
    return JSONResponse(metrics_json(state))


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)


# ----------------------------------------------------------------------------------------------------------
# Errors and authentication


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if exc.status < 500 and hasattr(request.app.state, "onewell"):
        request.app.state.onewell.requests_invalid += 1
    return error_response(exc.status, exc.message, exc.type, exc.code, exc.param, exc.headers)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}", kind,
                          headers=dict(exc.headers or {}))


async def on_unexpected_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal server error", "server_error")


class ReplicaHeaderMiddleware:
    """Names the engine that answered (`x-onewell-replica`) on every response: a Ray replica's id (kept when
    the response already names one: the Ray ingress passes replicas' responses on)."""

    def __init__(self, app, replica_id: str):
        self.app = app
        self.header = (b"x-onewell-replica", replica_id.encode("ascii"))

    async def __call__(self, scope, receive, send) -> None:
        async def send_with_header(message) -> None:
            if message["type"] == "http.response.start" and not any(
                    k.lower() == self.header[0] for k, _ in message.get("headers", [])):
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_header if scope["type"] == "http" else send)


class ApiKeyMiddleware:
    """With API keys set, every route but the page, /health and /openapi.json wants `Authorization: Bearer KEY`
    with one of them; the request's scope then names which (CLIENT_KEY: its index), for per-key prompt caches."""

    def __init__(self, app, api_keys: Sequence[str]):
        self.app = app
        self.api_keys = [key.encode("utf-8") for key in api_keys]

    def _key_index(self, token: bytes) -> int | None:
        found = None
        for i, key in enumerate(self.api_keys):  # compare with every key: the time does not tell which matched
            if hmac.compare_digest(token, key):
                found = i
        return found

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self._public(scope["path"]):
            scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
            index = self._key_index(token.strip().encode("utf-8")) if scheme.lower() == "bearer" else None
            if index is not None:
                scope[CLIENT_KEY] = f"key{index}"
            else:
                response = error_response(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                          "authentication_error", code="invalid_api_key",
                                          headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _public(path: str) -> bool:
        return path in PUBLIC_PATHS or path.startswith("/static/")


# ----------------------------------------------------------------------------------------------------------
# The application


def create_app(model: Any, *, parallel: int = 1, queue: int = 8, api_key: str | Sequence[str] | None = None,
               model_name: str | None = None, threads: int | None = None,
               prefill_chunk: int = PREFILL_CHUNK, allowed_hosts: Sequence[str] = (),
               limits: ServerLimits | None = None, share_prompt_cache: bool = False,
               replica_id: str | None = None) -> Starlette:
    """An ASGI app serving `model` (from onewell.load) with `parallel` slots and a queue of `queue`;
    `replica_id` (a Ray replica) is sent back in the `x-onewell-replica` header of every response.

    Requests must name a loopback host or one of `allowed_hosts` ('*': any) in their Host header; `limits`
    bounds connections, slow clients, JSON nesting and the preparation threads (limits.ServerLimits).
    With several API keys, a request reuses only KV cache prefixes of requests made with its own key (the
    prompt cache would otherwise let one client probe another's prompts through `cached_tokens` and timing),
    unless share_prompt_cache.
    The server owns the model from here on: slot 0 generates on model.backend."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, got {parallel}")
    if queue < 0:
        raise ValueError(f"queue must be >= 0, got {queue}")
    api_keys = [api_key] if isinstance(api_key, str) else list(api_key or [])
    if any(not key.strip() for key in api_keys):
        raise ValueError("the API key must not be empty")
    if getattr(model, "is_embedding", False):   # no generation slots: requests run one forward each, in turn
        scheduler = EmbeddingScheduler(model, queue_capacity=queue)
    else:
        backends = slot_backends(model.backend, model.spec, parallel, threads)
        scheduler = Scheduler(backends, model.tokenizer, queue_capacity=queue, prefill_chunk=prefill_chunk)
    name = model_name or (Path(model.path).stem if getattr(model, "path", None) else "onewell")
    limits = limits or ServerLimits()
    gate = PrepareGate(scheduler, limits.prepare_threads)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            gate.close()

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    handlers = {ApiError: on_api_error, HTTPException: on_http_error, Exception: on_unexpected_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    if api_keys:
        app.add_middleware(ApiKeyMiddleware, api_keys=api_keys)
    app.add_middleware(BodyTimeoutMiddleware, timeout=limits.body_timeout)
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(HostAllowListMiddleware, allowed=HostAllowList(allowed_hosts))  # runs before the ones above
    if replica_id is not None:  # outermost: even a refused request names the replica that refused it
        app.add_middleware(ReplicaHeaderMiddleware, replica_id=replica_id)
    app.state.limits = limits
    app.state.onewell = ServerState(model=model, scheduler=scheduler, model_name=name, created=int(time.time()),
                                    gate=gate, share_prompt_cache=share_prompt_cache)
    app.state.openapi = build_openapi()
    return app


# ----------------------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onewell serve", description="OpenAI-compatible HTTP server with a chat page.")
    p.add_argument("model", help="registry name or path to a .gguf file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (8080)")
    p.add_argument("--parallel", type=positive_int, default=1, help="requests generated at once, one KV cache each (1)")
    p.add_argument("--queue", type=nonnegative_int, default=8, help="requests that may wait for a slot (8); more get 503")
    p.add_argument("--api-key", action="append", default=None,
                   help="require 'Authorization: Bearer KEY'; repeat for several clients, each with its own prompt "
                        "cache (default: $ONEWELL_API_KEY, comma-separated keys, else no key)")
    p.add_argument("--share-prompt-cache", action="store_true",
                   help="let requests of different API keys reuse each other's cached prompt prefixes")
    p.add_argument("--threads", type=positive_int, default=None, help="worker threads of the native backend")
    p.add_argument("--ctx-size", "-c", type=positive_int, default=4096, help="context tokens per slot (4096)")
    p.add_argument("--backend", choices=("native", "reference"), default="native")
    p.add_argument("--kv-type", choices=("f32", "f16", "q8_0"), default="f16",
                   help="KV cache element type of every slot: f16 (default), f32, q8_0")
    p.add_argument("--name", default=None, help="model id reported by /v1/models (default: the file name)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    d = ServerLimits()
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="also serve requests whose Host header names NAME (repeatable; '*': any). Loopback names "
                        "are always served, and so is --host when it is a specific address")
    p.add_argument("--max-connections", type=positive_int, default=d.max_connections,
                   help=f"open connections; more get 503 ({d.max_connections})")
    p.add_argument("--header-timeout", type=positive_float, default=d.header_timeout,
                   help=f"seconds for a request head to arrive ({d.header_timeout:g})")
    p.add_argument("--body-timeout", type=positive_float, default=d.body_timeout,
                   help=f"seconds for a request body to arrive ({d.body_timeout:g})")
    from onewell.serve.ray_options import add_ray_arguments  # plain argparse; Ray itself only when used

    add_ray_arguments(p)
    return p


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GracefulServer(uvicorn.Server):
    """uvicorn.Server that, when told to exit (Ctrl-C, SIGTERM, stop()), first ends the running replies with
    an error event, so shutdown neither waits for long generations nor cuts a stream off mid-event."""

    def __init__(self, config: uvicorn.Config, scheduler: Scheduler):
        super().__init__(config)
        self.scheduler = scheduler

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        self.scheduler.abort_all_threadsafe()

    def stop(self) -> None:
        self.should_exit = True
        self.scheduler.abort_all_threadsafe()


def main(argv: list[str] | None = None) -> int:
    import onewell

    args = build_parser().parse_args(argv)
    if args.api_key is None:
        args.api_key = [k for k in os.environ.get("ONEWELL_API_KEY", "").split(",") if k.strip()]
    if not _is_loopback(args.host) and not args.api_key:
        print(f"onewell serve: warning: listening on {args.host} without --api-key: anyone who can reach this "
              "port can use the model", file=sys.stderr)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(name)s: %(message)s")
    from onewell.serve.ray_options import wants_ray

    if wants_ray(args):  # --replicas, --ray-address, autoscaling or --config: Ray Serve (serve/ray_*.py)
        from onewell.serve.ray_cli import serve_on_ray

        return serve_on_ray(args)
    model = onewell.load(args.model, backend=args.backend, threads=args.threads, n_ctx=args.ctx_size,
                         kv_type=args.kv_type)
    name = args.name or (Path(args.model).stem if str(args.model).endswith(".gguf") else str(args.model))
    limits = ServerLimits(max_connections=args.max_connections, header_timeout=args.header_timeout,
                          body_timeout=args.body_timeout)
    app = create_app(model, parallel=args.parallel, queue=args.queue, api_key=args.api_key, model_name=name,
                     threads=args.threads, allowed_hosts=allowed_hosts_for(args.host, args.allowed_host),
                     limits=limits, share_prompt_cache=args.share_prompt_cache)
    if args.host in ("0.0.0.0", "::") and not args.allowed_host:
        print("onewell serve: note: only Host headers naming this machine's loopback are served; add "
              "--allowed-host NAME for the names other machines use", file=sys.stderr)
    print(f"onewell serve: {name} on http://{args.host}:{args.port}/ ({args.parallel} slot(s) of "
          f"{args.ctx_size} tokens, queue {args.queue})", file=sys.stderr)
    config = uvicorn_config(app, limits, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=5)
    try:
        GracefulServer(config, app.state.onewell.scheduler).run()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled; the shutdown was clean
        pass
    return 0
