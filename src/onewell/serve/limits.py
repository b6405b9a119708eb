"""Bounds on what clients can make the server hold: connections, time to send a request, and the work done
before a request reaches the scheduler's queue.

- Connections: uvicorn's `limit_concurrency` (connections or running requests past it get 503), its
  keep-alive timeout, and h11's limit on an incomplete request head (`max_header_bytes`, 431/400 beyond).
- Slow clients: uvicorn has no timeout for a request head that trickles in, so `TimedH11Protocol` closes a
  connection whose head is not complete `header_timeout` seconds after it opened (or after its last response
  ended); `BodyTimeoutMiddleware` answers 408 when the whole body has not arrived `body_timeout` seconds after
  the app first asked for it.
- Preparation (chat template and tokenization): `PrepareGate` runs it on its own small thread pool (not the one
  the scheduler's generation steps use) and admits a request to it only while the scheduler would still have
  room for it, so a burst of large bodies gets 503s instead of queueing unbounded work ahead of the 503 check.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass
from typing import Any, Callable

import h11
import uvicorn
from starlette.exceptions import HTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from onewell.serve.security import MAX_JSON_DEPTH


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int = 256       # open connections (and running requests); more get 503
    header_timeout: float = 10.0     # seconds for a request head to arrive
    body_timeout: float = 30.0       # seconds for a whole body to arrive
    keep_alive: int = 5              # seconds an idle keep-alive connection stays open
    max_header_bytes: int = 16384    # bytes of a request head (h11's incomplete event limit)
    max_json_depth: int = MAX_JSON_DEPTH  # nesting of a JSON body (security.check_json_depth)
    prepare_threads: int = 2         # threads rendering chat templates and tokenizing

    def __post_init__(self) -> None:
        for name in ("max_connections", "keep_alive", "max_header_bytes", "max_json_depth", "prepare_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("header_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


# ---- the request head -------------------------------------------------------------------------------------


def timed_h11_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for each request head."""

    class TimedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.logger.debug("closing a connection whose request head did not arrive in %s s", header_timeout)
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is complete (body or done follows)
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()  # the next request on this connection gets its own deadline

        def connection_lost(self, exc) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return TimedH11Protocol


def uvicorn_config(app, limits: ServerLimits, **kwargs) -> uvicorn.Config:
    """uvicorn.Config for `app` with the connection limits; kwargs (host, port, log_level, ...) pass through."""
    return uvicorn.Config(app, http=timed_h11_protocol(limits.header_timeout), limit_concurrency=limits.max_connections,
                          timeout_keep_alive=limits.keep_alive, h11_max_incomplete_event_size=limits.max_header_bytes,
                          **kwargs)


# ---- the body ---------------------------------------------------------------------------------------------


class BodyTimeoutMiddleware:
    """The whole request body within `timeout` seconds of the app's first read, else 408 (an HTTPException the
    app's handlers answer). Reads after the body (waiting for a disconnect) are not timed."""

    def __init__(self, app, timeout: float):
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        body_done = False

        async def timed_receive():
            nonlocal deadline, body_done
            if body_done:
                return await receive()
            if deadline is None:
                deadline = loop.time() + self.timeout
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except asyncio.TimeoutError:
                body_done = True
                # The rest of the body may still come: the connection cannot carry another request, so close it.
                raise HTTPException(408, f"the request body did not arrive within {self.timeout:g} s",
                                    headers={"Connection": "close"}) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        await self.app(scope, timed_receive, send)


# ---- preparation ------------------------------------------------------------------------------------------


class PrepareGate:
    """Template rendering and tokenization on `threads` threads of their own, admitted only while the scheduler
    has room: requests preparing count as waiting. `full()` raises the scheduler's QueueFullError."""

    def __init__(self, scheduler, threads: int):
        self.scheduler = scheduler
        self.preparing = 0
        self.executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="onewell-prepare")

    async def run(self, fn: Callable[..., Any], *args) -> Any:
        self.scheduler.check_room(extra_waiting=self.preparing)
        self.preparing += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        finally:
            self.preparing -= 1

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
