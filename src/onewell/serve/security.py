"""What keeps web pages of other sites away from a local server, and hostile bodies away from the parser.

- Host allow-list (HostAllowListMiddleware): a page on evil.example can make its own name resolve to 127.0.0.1
  (DNS rebinding); the browser then sends `Host: evil.example` and lets that page read the replies. Only the
  loopback names (and the names the operator adds with --allowed-host) are served; other Host headers get 400.
- JSON bodies only (JsonBodyMiddleware): a cross-site `fetch(..., {mode: "no-cors", body: blob})` or a form
  can POST without a CORS preflight only with no Content-Type or a form/text type; requiring
  `Content-Type: application/json` means a browser must ask first, and this server answers no CORS approval.
- JSON nesting depth (check_json_depth): measured before parsing, without recursion, so 200,000 nested
  brackets are a 400 and not a RecursionError in the parser.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Iterable, Sequence

import numpy as np
from starlette.datastructures import Headers

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
BODY_METHODS = ("POST", "PUT", "PATCH")
MAX_JSON_DEPTH = 64


def _error(status: int, message: str, code: str):
    from onewell.serve.app import error_response  # the one error shape of the server

    return error_response(status, message, code=code)


# ---- Host -------------------------------------------------------------------------------------------------


def host_name(host_header: str) -> str:
    """The name part of a Host header: 'a.b:8080' -> 'a.b', '[::1]:8080' -> '::1', lower case."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always this machine
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostAllowList:
    """Loopback names and addresses always; plus `extra` names ('*' allows every host)."""

    def __init__(self, extra: Iterable[str] = ()):
        self.names = {host_name(h) for h in extra if h and h.strip()}
        self.any = "*" in self.names

    def allows(self, host_header: str | None) -> bool:
        if host_header is None:  # HTTP/1.0 without Host: not a browser (browsers always send it)
            return True
        name = host_name(host_header)
        return self.any or _is_loopback(name) or name in self.names


def allowed_hosts_for(host: str, extra: Sequence[str]) -> list[str]:
    """--allowed-host names, plus the listening address unless it is a wildcard (0.0.0.0, ::)."""
    names = list(extra)
    if host not in ("0.0.0.0", "::", ""):
        names.append(host)
    return names


class HostAllowListMiddleware:
    def __init__(self, app, allowed: HostAllowList):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self.allowed.allows(Headers(scope=scope).get("host")):
            response = _error(400, "this Host is not served (DNS rebinding protection); start the server with "
                                   "--allowed-host NAME to serve it", "host_not_allowed")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# ---- Content-Type -----------------------------------------------------------------------------------------


def is_json_content_type(value: str | None) -> bool:
    return (value or "").split(";")[0].strip().lower() == "application/json"


class JsonBodyMiddleware:
    """Requests with a body (POST, PUT, PATCH) must declare `Content-Type: application/json`: 415 otherwise."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] in BODY_METHODS:
            declared = Headers(scope=scope).get("content-type")
            if not is_json_content_type(declared):
                response = _error(415, "the body must be JSON sent with 'Content-Type: application/json', not "
                                       f"{declared or 'no Content-Type'}", "unsupported_media_type")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# ---- JSON depth -------------------------------------------------------------------------------------------

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: no backtracking per character
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets inside strings do not count); linear,
    no recursion. Meant for a body that is then parsed: malformed text gives some number, and json.loads then
    reports what is wrong with it."""
    if body.count(b"[") + body.count(b"{") == 0:
        return 0
    outside = _STRING.sub(b'""', body)
    steps = _OPEN[np.frombuffer(outside, np.uint8)]
    steps = steps[steps != 0]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def check_json_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """ValueError when the body nests deeper than `limit`. Cheap when it cannot: fewer brackets than the limit."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return
    depth = json_depth(body)
    if depth > limit:
        raise ValueError(f"the JSON body nests {depth} levels deep, more than the limit of {limit}")
