"""Slots, a bounded queue, and the tick loop that advances every active slot by one step.

A slot is one sequence being generated: its own KV cache (a Backend), sampler, decoder and stop-string
holdback. Requests wait in a FIFO queue of bounded length (full: QueueFullError, the server's 503) until a
slot is free; the free slot whose cache shares the longest prefix with the prompt is chosen, so a chat
that grows turn by turn evaluates only the new turn.

Threads: the scheduler lives on the asyncio event loop; only the tick (forwards and sampling) runs in a
worker thread, while the loop keeps serving other requests. Slot state is touched either by the loop
between ticks or by the worker during one, never both at once, so it needs no lock. A cancelled job
(client gone) frees its slot when the running tick ends, which is one token step (or one prefill chunk).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from onewell.errors import OnewellError
from onewell.runtime.backend import Backend, batch_groups
from onewell.runtime.generate import common_prefix_length
from onewell.runtime.logprobs import log_softmax, top_alternatives
from onewell.runtime.sampling import Sampler, SamplingParams
from onewell.serve.streaming import Alternative, Release, StopHoldback, TokenLogprob
from onewell.tokenizer import IncrementalDecoder, Tokenizer

log = logging.getLogger("onewell.serve")

# Prompt tokens a slot feeds per tick: a long prompt is prefilled in pieces, so the other slots keep
# producing tokens in between instead of stalling for the whole prefill.
PREFILL_CHUNK = 128


class QueueFullError(OnewellError):
    """Every slot is busy and the waiting queue is at capacity."""


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    max_tokens: int
    sampling: SamplingParams
    stop: Sequence[str] = ()
    logprobs: int | None = None  # None: off; k: the chosen token's logprob and the k most likely alternatives
    ignore_eos: bool = False
    constraint: Any = None  # onewell.structured Constraint: masks the logits, ends the reply when complete
    cache_owner: str | None = None  # reuses cached prefixes only of requests with the same owner (API key)


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    prompt_seconds: float  # admission to first token (waiting in the queue not included)
    gen_seconds: float     # first token to last


# Events a job receives, in order: any number of Chunk, then one Done or Failed.
@dataclass
class Chunk:
    release: Release


@dataclass
class Done:
    finish_reason: str  # "stop" (end-of-generation token or stop string) or "length"
    usage: Usage


@dataclass
class Failed:
    message: str
    status: int = 500  # what a non-streamed reply answers; 503 when the server is shutting down


Event = Chunk | Done | Failed


class Job:
    """One request's life in the scheduler. The server reads `events`; `cancel()` when the client leaves."""

    def __init__(self, request: GenerationRequest, scheduler: Scheduler):
        self.request = request
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.cancelled = False
        self.finished = False
        self._scheduler = scheduler

    def cancel(self) -> None:
        """Idempotent; a finished job ignores it. Call from the event loop's thread."""
        if self.finished or self.cancelled:
            return
        self.cancelled = True
        self._scheduler._on_cancel(self)


class Slot:
    def __init__(self, index: int, backend: Backend, tokenizer: Tokenizer):
        self.index = index
        self.backend = backend
        self.tokenizer = tokenizer
        self.cache_ids: list[int] = []  # the tokens the KV cache holds, for prefix reuse
        self.cache_owner: str | None = None  # whose request filled it
        self.last_used = 0.0
        self.job: Job | None = None

    # -- between ticks (event loop) ---------------------------------------------------------------------

    def assign(self, job: Job) -> None:
        req = job.request
        prompt = req.prompt_ids
        reuse = min(self.reusable_prefix(req), len(prompt) - 1)  # >= 1 token for logits
        self.cache_owner = req.cache_owner
        self.backend.truncate(reuse)
        del self.cache_ids[reuse:]
        self.job = job
        self.pending = list(prompt[reuse:])  # prompt tokens still to feed
        self.next_input: list[int] = []
        self.cached_tokens = reuse
        self.sampler = Sampler(req.sampling)
        self.decoder = IncrementalDecoder(self.tokenizer, skip_special=True)
        self.holdback = StopHoldback(req.stop)
        self.history = list(prompt)  # what the repetition penalty looks back over
        self.generated = 0
        self.started = time.perf_counter()
        self.first_token_at: float | None = None

    def reusable_prefix(self, req: GenerationRequest) -> int:
        """Prompt tokens this slot's cache already holds, if the request may reuse them (same owner)."""
        if self.cache_owner != req.cache_owner:
            return 0
        return common_prefix_length(self.cache_ids, req.prompt_ids)

    def release(self) -> None:
        self.job = None
        self.last_used = time.monotonic()

    # -- inside a tick (worker thread) ------------------------------------------------------------------

    def take_input(self, prefill_chunk: int) -> list[int]:
        if self.pending:
            chunk, self.pending = self.pending[:prefill_chunk], self.pending[prefill_chunk:]
            return chunk
        return self.next_input

    def record_fed(self, tokens: list[int]) -> None:
        """Keep cache_ids equal to what the cache holds, also after a forward that failed halfway."""
        fed = self.cache_ids + tokens
        self.cache_ids = fed[:self.backend.n_past]

    def after_forward(self, logits: np.ndarray) -> list[Event]:
        """Sample from the logits of the last fed token; returns the events for the job."""
        if self.pending:
            return []  # still prefilling: these logits belong to a prompt token
        req = self.job.request
        constraint = req.constraint
        token = self.sampler.sample(constraint.mask(logits) if constraint is not None else logits, self.history)
        now = time.perf_counter()
        if self.first_token_at is None:
            self.first_token_at = now
        self.generated += 1
        logprob = token_logprob(self.tokenizer, logits, token, req.logprobs) if req.logprobs is not None else None

        if token in self.tokenizer.eog_ids and not req.ignore_eos:
            return self._finish("stop", self.holdback.finish(self.decoder.flush()), logprob)
        if constraint is not None:
            constraint.accept(token)
        self.history.append(token)
        self.next_input = [token]
        release = self.holdback.push(self.decoder.add(token), logprob)
        if self.holdback.stopped:
            return self._finish("stop", release)
        if constraint is not None and constraint.finished:  # the grammar is complete: only an end token could follow
            tail = self.holdback.finish(self.decoder.flush())
            return self._finish("stop", Release(release.text + tail.text, release.logprobs + tail.logprobs))
        if self.generated >= req.max_tokens:
            tail = self.holdback.finish(self.decoder.flush())
            return self._finish("length", Release(release.text + tail.text, release.logprobs + tail.logprobs))
        return [Chunk(release)] if release else []

    def _finish(self, reason: str, release: Release, eog_logprob: TokenLogprob | None = None) -> list[Event]:
        if eog_logprob is not None:  # the end token has no text, but clients asking for logprobs see it
            release.logprobs.append(eog_logprob)
        now = time.perf_counter()
        first = self.first_token_at or now
        usage = Usage(prompt_tokens=len(self.job.request.prompt_ids), completion_tokens=self.generated,
                      cached_tokens=self.cached_tokens, prompt_seconds=first - self.started,
                      gen_seconds=now - first)
        events: list[Event] = [Chunk(release)] if release else []
        return events + [Done(reason, usage)]


def token_logprob(tokenizer: Tokenizer, logits: np.ndarray, token: int, k: int) -> TokenLogprob:
    """log-softmax of the raw logits (the model's distribution, before temperature and filters)."""
    logp = log_softmax(logits)
    top = tuple(_alternative(tokenizer, i, lp) for i, lp in top_alternatives(logp, k))
    chosen = _alternative(tokenizer, token, float(logp[token]))
    return TokenLogprob(chosen.token, chosen.logprob, chosen.bytes, top)


def _alternative(tokenizer: Tokenizer, token: int, logprob: float) -> Alternative:
    raw = tokenizer.token_bytes(token)
    return Alternative(raw.decode("utf-8", errors="replace"), logprob, tuple(raw))


# ==========================================================================================================
# THE BATCHED STEP: the one function a native multi-sequence forward replaces.


def step_sequences(backends: Sequence[Backend], inputs: Sequence[list[int]]) -> list[np.ndarray | Exception]:
    """Append inputs[i] to sequence i and return the logits of its last token (or the exception it raised).

    Slots that are sequences of one engine (a NativeMultiBackend) advance together in its batched step (every
    weight read once for all of them: what makes batching pay on a memory-bound CPU); other backends run one
    forward each, on their own KV caches (runtime/backend.py: batch_groups)."""
    out: list[np.ndarray | Exception | None] = [None] * len(backends)
    for group, members in batch_groups(backends):
        requests = []
        for i, seq_id in members:
            try:  # a request the batch would refuse fails alone, not the whole batch
                group.check_request(seq_id, inputs[i])
            except Exception as e:
                out[i] = e
                continue
            requests.append((i, seq_id))
        if not requests:
            continue
        try:
            logits = group.forward_batch([(seq_id, inputs[i]) for i, seq_id in requests])
        except Exception as e:  # one engine failing must not take the others down
            logits = [e] * len(requests)
        for (i, _), result in zip(requests, logits):
            out[i] = result
    return out

# ==========================================================================================================


@dataclass
class Counters:
    requests_served: int = 0
    requests_rejected: int = 0
    requests_cancelled: int = 0
    requests_failed: int = 0
    prompt_tokens_evaluated: int = 0
    prompt_tokens_cached: int = 0
    tokens_generated: int = 0
    ticks: int = 0


@dataclass
class Scheduler:
    backends: Sequence[Backend]
    tokenizer: Tokenizer
    queue_capacity: int = 8
    prefill_chunk: int = PREFILL_CHUNK
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("a scheduler needs at least one slot")
        if self.queue_capacity < 0:
            raise ValueError(f"queue capacity must be >= 0, got {self.queue_capacity}")
        self.slots = [Slot(i, b, self.tokenizer) for i, b in enumerate(self.backends)]
        self.queue: deque[Job] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._closing = False

    @property
    def n_ctx(self) -> int:
        return min(b.n_ctx for b in self.backends)

    # -- lifecycle (call from the event loop) ------------------------------------------------------------

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._stopping = False
        self._closing = False
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="onewell-scheduler")

    def abort_all(self, message: str = "the server is shutting down") -> None:
        """Ends every waiting and running request now (their streams close properly) and takes no new ones.
        For a shutdown: the HTTP server then need not wait for long replies to finish."""
        self._closing = True
        for job in list(self.queue):
            self._fail(job, message, status=503)
        self.queue.clear()
        for slot in self.slots:
            if slot.job is not None:
                self._fail(slot.job, message, status=503)
                slot.job.cancelled = True  # the loop frees the slot when the running tick is over
        if self._wake is not None:
            self._wake.set()

    def abort_all_threadsafe(self, message: str = "the server is shutting down") -> None:
        """abort_all from any thread (a signal handler, a test's thread)."""
        loop = getattr(self, "_loop", None)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.abort_all, message)

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._wake.set()
            await self._task
            self._task = None
        for job in list(self.queue) + [s.job for s in self.slots if s.job is not None]:
            self._fail(job, "the server is shutting down", status=503)
        self.queue.clear()
        for slot in self.slots:
            slot.release()

    def check_room(self, extra_waiting: int = 0) -> None:
        """QueueFullError unless one more request (beyond `extra_waiting` others on their way, e.g. being
        tokenized) would find a free slot or a place in the queue."""
        if self._task is None or self._stopping or self._closing:
            raise QueueFullError("the server is shutting down")
        # queued jobs take free slots at the loop's next turn; a slot whose client hung up is freed then too,
        # so it counts as free now (a client that reconnects at once is not refused), and so do the
        # cancelled jobs still in the queue (they are dropped at that turn)
        free = sum(s.job is None or s.job.cancelled for s in self.slots)
        waiting = sum(not j.cancelled for j in self.queue) + extra_waiting
        if waiting >= free + self.queue_capacity:
            self.counters.requests_rejected += 1
            raise QueueFullError(f"all {len(self.slots)} slots are busy and {waiting} requests are "
                                 "waiting; try again shortly")

    def submit(self, request: GenerationRequest) -> Job:
        """Queue a request; raises QueueFullError when all slots are busy and the queue is full."""
        self.check_room()
        job = Job(request, self)
        self.queue.append(job)
        self._wake.set()
        return job

    def metrics(self) -> dict[str, int]:
        return {
            "slots": len(self.slots),
            "active_slots": sum(s.job is not None for s in self.slots),
            "queue_length": len(self.queue),
            "queue_capacity": self.queue_capacity,
            **vars(self.counters),
            "kv_tokens_in_use": sum(s.backend.n_past for s in self.slots),
            "kv_tokens_capacity": sum(s.backend.n_ctx for s in self.slots),
        }

    # -- the loop ------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                self._drop_cancelled()
                self._admit()
                active = [s for s in self.slots if s.job is not None]
                if not active:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                results = await asyncio.to_thread(self._tick, active)
                self.counters.ticks += 1
                for slot, events in results:
                    self._deliver(slot, events)
            except Exception:  # a bug here must not leave every later request hanging
                log.exception("scheduler tick failed; failing the active requests")
                for slot in self.slots:
                    if slot.job is not None:
                        self._fail(slot.job, "internal error while generating")
                        slot.backend.reset()
                        slot.cache_ids.clear()
                        slot.release()

    def _tick(self, active: list[Slot]) -> list[tuple[Slot, list[Event]]]:
        """Worker thread: one step for every active slot."""
        prefilling = [bool(slot.pending) for slot in active]
        inputs = [slot.take_input(self.prefill_chunk) for slot in active]
        outcomes = step_sequences([slot.backend for slot in active], inputs)
        results = []
        for slot, tokens, was_prefill, outcome in zip(active, inputs, prefilling, outcomes):
            slot.record_fed(tokens)
            if was_prefill:
                self.counters.prompt_tokens_evaluated += len(tokens)
            if isinstance(outcome, Exception):
                log.error("forward failed in slot %d", slot.index, exc_info=outcome)
                results.append((slot, [Failed("internal error while generating")]))
                continue
            try:
                generated = slot.generated
                results.append((slot, slot.after_forward(outcome)))
                self.counters.tokens_generated += slot.generated - generated
            except Exception:
                log.exception("sampling failed in slot %d", slot.index)
                results.append((slot, [Failed("internal error while sampling")]))
        return results

    def _deliver(self, slot: Slot, events: list[Event]) -> None:
        job = slot.job
        finished = bool(events) and isinstance(events[-1], (Done, Failed))
        if job.cancelled:  # the client left during the tick: nobody reads these events
            self._free(slot)
            return
        for event in events:
            job.events.put_nowait(event)
        if finished:
            job.finished = True
            last = events[-1]
            if isinstance(last, Done):
                self.counters.requests_served += 1
            else:
                self.counters.requests_failed += 1
            self._free(slot)

    def _free(self, slot: Slot) -> None:
        slot.release()
        self._wake.set()

    def _admit(self) -> None:
        free = [s for s in self.slots if s.job is None]
        while self.queue and free:
            job = self.queue.popleft()
            # Longest reusable prefix first; among equals the least recently used, keeping warm caches warm.
            slot = max(free, key=lambda s: (s.reusable_prefix(job.request), -s.last_used))
            free.remove(slot)
            slot.assign(job)
            self.counters.prompt_tokens_cached += slot.cached_tokens

    def _drop_cancelled(self) -> None:
        for slot in self.slots:
            if slot.job is not None and slot.job.cancelled:
                self._free(slot)

    def _on_cancel(self, job: Job) -> None:
        self.counters.requests_cancelled += 1
        try:
            self.queue.remove(job)
        except ValueError:
            pass  # it holds a slot: the loop frees it once the running tick is over
        if self._wake is not None:
            self._wake.set()

    def _fail(self, job: Job, message: str, status: int = 500) -> None:
        if not job.finished:
            job.finished = True
            job.events.put_nowait(Failed(message, status))
