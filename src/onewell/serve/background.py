"""Run the server in a background thread of this process (tests, notebooks, benchmarks).

    with BackgroundServer(create_app(model)) as server:
        openai.OpenAI(base_url=server.url + "/v1", api_key="-")...

Binds 127.0.0.1 on a free port chosen by the OS (the socket is bound before uvicorn starts, so there is
no window in which another process could take the port).
"""
from __future__ import annotations

import socket
import threading
import time



class BackgroundServer:
    def __init__(self, app, host: str = "127.0.0.1", start_timeout: float = 30.0, log_level: str = "warning"):
        self.app = app
        self.host = host
        self.start_timeout = start_timeout
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port = self._sock.getsockname()[1]
        from onewell.serve.app import GracefulServer
        from onewell.serve.limits import ServerLimits, uvicorn_config

        limits = getattr(app.state, "limits", None) or ServerLimits()
        config = uvicorn_config(app, limits, log_level=log_level, timeout_graceful_shutdown=2, lifespan="on")
        self._server = GracefulServer(config, app.state.onewell.scheduler)
        self._thread = threading.Thread(target=self._serve, name=f"onewell-server-{self.port}", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _serve(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except BaseException as e:  # surfaced by start(), not lost in the thread
            self._error = e

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the server did not start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the server did not start within {self.start_timeout} s")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._server.stop()  # running replies end with an error event; then uvicorn shuts down
        self._thread.join(timeout)
        self._sock.close()
        if self._thread.is_alive():
            raise TimeoutError(f"the server thread did not stop within {timeout} s")

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
