"""The onewell server as a Ray Serve application: one ingress in front of N engine replicas.

    HTTP -> Ray's proxy -> ingress (reads the body, keys its prompt prefix)
         -> handle + PrefixAffinityRouter (ray_router.py) -> engine replica: the full onewell app (app.py)

Ray's HTTP proxy hands a request to its deployment before the body is read, so a router there could not
see the prompt. The ingress (one light replica, no model) reads the body and calls the engine deployment
through a handle, whose request router can route on the prompt. Each engine replica runs the unchanged
Starlette app of the single server in-process (every endpoint, streaming, auth, limits, its own scheduler
with --parallel slots and --queue) and streams its ASGI messages back; the ingress sends them on as they
come. A client that leaves cancels the handle call, which cancels the replica's request: its slot frees.

The ingress answers /health (the replicas, each with its last metrics) and /metrics (all replicas, labelled)
itself from the routing stats every replica reports every second; everything else goes to a replica, whose
id is in the `x-onewell-replica` header of each response.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from onewell.serve.app import (MAX_BODY_BYTES, RETRY_AFTER_SECONDS, ApiKeyMiddleware, ReplicaHeaderMiddleware,
                               error_response, metrics_json)
from onewell.serve.ray_options import APP_NAME, RayServeOptions
from onewell.serve.ray_prefix import prefix_keys, prompt_text
from onewell.serve.ray_reports import replica_reports

log = logging.getLogger("onewell.serve.ray")

ROUTING_STATS_PERIOD_S = 1.0  # how often each replica reports its metrics (routing, /health, /metrics)


@dataclass(frozen=True)
class ForwardedRequest:
    """An HTTP request as the ingress received it, for a replica to replay into its app."""

    method: str
    path: str
    query_string: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    client: tuple[str, int] | None
    prefix_keys: tuple[bytes, ...] = ()  # read by the router


class EngineReplica:
    """One onewell engine: its model, threads, slots and queue, serving the app of app.py."""

    def __init__(self, options: RayServeOptions):
        import onewell
        from onewell.serve.app import create_app

        self.replica_id = serve.get_replica_context().replica_id.unique_id
        model = onewell.load(options.model, backend=options.backend, threads=options.threads,
                             n_ctx=options.ctx_size, kv_type=options.kv_type)
        self.app = create_app(model, parallel=options.parallel, queue=options.queue, api_key=options.api_key,
                              model_name=options.name, threads=options.threads, replica_id=self.replica_id,
                              allowed_hosts=options.allowed_hosts, share_prompt_cache=options.share_prompt_cache)
        self.threads = options.threads
        self._lifespan: contextlib.AbstractAsyncContextManager | None = None

    async def _start(self) -> None:
        if self._lifespan is None:  # the scheduler needs the replica's event loop: start on first use
            self._lifespan = self.app.router.lifespan_context(self.app)
            await self._lifespan.__aenter__()

    async def forward(self, request: ForwardedRequest) -> AsyncIterator[dict[str, Any]]:
        """Replays `request` into the app and yields its ASGI messages. Closing this generator early (the
        caller was cancelled: the client left) tells the app the client disconnected."""
        await self._start()
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                 "method": request.method, "scheme": "http", "path": request.path,
                 "raw_path": request.path.encode("utf-8"), "query_string": request.query_string,
                 "root_path": "", "headers": request.headers, "client": request.client, "server": None}
        out: asyncio.Queue = asyncio.Queue()
        gone = asyncio.Event()
        body_given = False

        async def receive() -> dict[str, Any]:
            nonlocal body_given
            if not body_given:
                body_given = True
                return {"type": "http.request", "body": request.body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            await out.put(message)

        task = asyncio.ensure_future(self.app(scope, receive, send))
        task.add_done_callback(lambda _: out.put_nowait(None))
        try:
            while (message := await out.get()) is not None:
                yield message
        finally:
            gone.set()  # the app sees http.disconnect and cancels its job (app.events_until_done)
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
            except Exception:  # the app answers its own errors; this would be a bug in it
                log.exception("replica app failed")

    def ping(self) -> str:
        return self.replica_id

    def record_routing_stats(self) -> dict[str, Any]:
        """Reported to the router every ROUTING_STATS_PERIOD_S (Ray Serve's routing stats)."""
        import ray

        return {**metrics_json(self.app.state.onewell), "pid": os.getpid(), "threads": self.threads,
                "node_ip": ray.util.get_node_ip_address()}

    async def __del__(self):
        if self._lifespan is not None:
            self.app.state.onewell.scheduler.abort_all()
            await self._lifespan.__aexit__(None, None, None)


class Ingress:
    """Reads each request, keys its prompt and forwards it to an engine replica (see the module doc)."""

    def __init__(self, engine: DeploymentHandle, options: RayServeOptions):
        self.engine = engine.options(stream=True, method_name="forward")
        self.pinger = engine.options(method_name="ping")
        self.options = options
        self.id = "ingress-" + serve.get_replica_context().replica_id.unique_id

    def __serve_build_asgi_app__(self):  # called by @serve.ingress() once the replica is constructed
        app = ReplicaHeaderMiddleware(self.asgi, self.id)
        return ApiKeyMiddleware(app, self.options.api_key) if self.options.api_key else app

    async def asgi(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":  # nothing to start or stop here
            while True:
                kind = (await receive())["type"]
                await send({"type": kind + ".complete"})  # lifespan.startup / lifespan.shutdown
                if kind == "lifespan.shutdown":
                    return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if scope["method"] == "GET" and path == "/health":
            await (await self.health())(scope, receive, send)
        elif scope["method"] == "GET" and path == "/metrics":
            await (await self.metrics(scope))(scope, receive, send)
        else:
            await self.forward(scope, receive, send)

    # -- the replicas' view ----------------------------------------------------------------------------------

    async def _reports(self) -> dict[str, dict[str, Any]]:
        reports = replica_reports()
        if not reports:  # the handle's router starts with its first call: make one
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.pinger.remote(), timeout=10)
            reports = replica_reports()
        return reports

    async def health(self):
        from starlette.responses import JSONResponse

        now = time.monotonic()
        replicas = [{"id": rid, "node_id": r["node"], "seconds_since_report": round(now - r["seen"], 3),
                     "metrics": r["stats"] or None} for rid, r in sorted((await self._reports()).items())]
        ok = bool(replicas)
        return JSONResponse({"status": "ok" if ok else "unavailable", "replicas": replicas},
                            status_code=200 if ok else 503)

    async def metrics(self, scope):
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response

        from onewell.serve.prometheus import wants_prometheus

        request = Request(scope)
        per_replica = {rid: r["stats"] for rid, r in sorted((await self._reports()).items()) if r["stats"]}
        if wants_prometheus(request.headers.get("accept", ""), request.query_params.get("format")):
            from onewell.serve.prometheus import CONTENT_TYPE_LATEST, render

            samples = [({"replica": rid}, m) for rid, m in per_replica.items()]
            return Response(render(samples), media_type=CONTENT_TYPE_LATEST)
        totals: dict[str, float] = {}
        for m in per_replica.values():
            for k, v in m.items():
                if isinstance(v, (int, float)) and k not in ("pid", "threads"):
                    totals[k] = totals.get(k, 0) + v
        return JSONResponse({**totals, "replicas": per_replica})

    # -- forwarding ------------------------------------------------------------------------------------------

    async def forward(self, scope, receive, send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                await error_response(413, f"request body larger than {MAX_BODY_BYTES} bytes")(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        text = prompt_text(scope["path"], bytes(body)) if scope["method"] == "POST" else None
        client = scope.get("client")
        request = ForwardedRequest(
            method=scope["method"], path=scope["path"], query_string=scope.get("query_string", b""),
            headers=[(bytes(k), bytes(v)) for k, v in scope.get("headers", [])], body=bytes(body),
            client=tuple(client) if client else None, prefix_keys=tuple(prefix_keys(text)) if text else ())
        replies = self.engine.remote(request)
        gone = asyncio.ensure_future(_client_gone(receive))
        started = False
        try:
            stream = replies.__aiter__()
            while True:
                step = asyncio.ensure_future(stream.__anext__())
                await asyncio.wait({step, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():  # the client left: stop the replica's work
                    step.cancel()
                    replies.cancel()
                    return
                try:
                    message = step.result()
                except StopAsyncIteration:
                    return
                started = started or message["type"] == "http.response.start"
                await send(message)
        except BackPressureError:
            if not started:
                await error_response(503, "all replicas are busy and the wait queue is full; retry later",
                                     "server_overloaded", code="queue_full",
                                     headers={"Retry-After": str(RETRY_AFTER_SECONDS)})(scope, receive, send)
        except (asyncio.CancelledError, GeneratorExit):
            replies.cancel()
            raise
        except Exception:
            log.exception("forwarding %s %s to a replica failed", scope["method"], scope["path"])
            if not started:
                await error_response(502, "the replica serving this request failed", "server_error")(
                    scope, receive, send)
        finally:
            gone.cancel()


async def _client_gone(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def build_application(options: RayServeOptions):
    """The bound Serve application: `serve.run(build_application(opts), name=APP_NAME, route_prefix="/")`."""
    router = RequestRouterConfig(request_router_class="onewell.serve.ray_router:PrefixAffinityRouter",
                                 request_router_kwargs={"parallel": options.parallel},
                                 request_routing_stats_period_s=ROUTING_STATS_PERIOD_S,
                                 request_routing_stats_timeout_s=10 * ROUTING_STATS_PERIOD_S)
    engine = serve.deployment(name="engine", request_router_config=router,
                              **options.engine_deployment_settings())(EngineReplica)
    # The ingress only parses and forwards: no model, no CPU reserved, many requests at once.
    ingress = serve.deployment(name="ingress", num_replicas=1, max_ongoing_requests=4096,
                               ray_actor_options={"num_cpus": 0})(serve.ingress()(Ingress))
    return ingress.bind(engine.bind(options), options)


def run(options: RayServeOptions, *, address: str | None, host: str, port: int) -> None:
    """Start (or join) Ray, deploy, serve until Ctrl-C / SIGTERM, then take the application down."""
    import signal
    import sys
    import threading

    import ray

    ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(build_application(options), name=APP_NAME, route_prefix="/")
        scaling = (f"autoscaling {options.min_replicas_or_default}-{options.max_replicas_or_default} replicas"
                   if options.autoscaling else f"{options.replicas} replica(s)")
        print(f"onewell serve: {options.name} on http://{host}:{port}/ via Ray Serve ({scaling}, each "
              f"{options.parallel} slot(s), queue {options.queue}, threads {options.threads or 'auto'}; "
              f"Ray at {address or 'a local instance'})", file=sys.stderr)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, docker stop: leave the loop, clean up below
            signal.signal(sig, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(0.5):
                pass
    finally:
        with contextlib.suppress(Exception):
            if address is None:
                serve.shutdown()  # our own local instance: all of it
            else:
                serve.delete(APP_NAME)  # a shared cluster: only our application
        ray.shutdown()
