"""Who may talk to the service: one ASGI middleware in front of any app (ours, or OpenReward's SDK app).

Loopback is not trust: any web page can make a browser send a request to ``127.0.0.1``, and a name an attacker
resolves to ``127.0.0.1`` (DNS rebinding) makes it a same-origin one. So every request, on any address:

* names this service in ``Host``: the address its connection came in on (``host:port``; for a loopback address also
  ``localhost``, ``127.0.0.1`` and ``[::1]`` at that port), or a name given with ``--allow-host``; else ``403``;
* has no ``Origin`` but the service's own (``http://`` and that ``Host``): a web page's request is ``403``;
* carries the token, as ``Authorization: Bearer <token>`` or ``X-API-Key: <token>`` (OpenReward's client sends its
  api_key so), compared in constant time; else ``401`` (the ``public`` paths, ``/healthz``, need none);
* with a body, says ``Content-Type: application/json``; else ``415``;
* has a body of at most ``max_body`` bytes, counted as they arrive (chunked too): past it the app reads nothing
  more, the answer is ``413`` and the connection is closed, so the service never holds more than the limit.

Every refusal is ``{"error": "<one line>"}`` and is counted in :attr:`Guard.refused` by status.
"""

from __future__ import annotations

import collections
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from kbagent.serve import is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_PORT = re.compile(r":\d+$")  # a Host value's port ("[::1]:8000"; never inside the brackets)
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$", re.IGNORECASE)
MIN_TOKEN_CHARS = 16


class Refusal(Exception):
    """A request the guard answers itself: HTTP ``status`` and one line."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def new_token() -> str:
    """A token for a service started without ``--token``: 43 URL-safe characters, 256 random bits."""
    return secrets.token_urlsafe(32)


def token_problem(token: str) -> str:
    """Why ``token`` cannot be the service's (``""`` when it can): too short, or not a plain header value."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"--token has {len(token)} characters: give at least {MIN_TOKEN_CHARS} (or leave it out: one is generated and printed)"
    if not token.isascii() or not token.isprintable() or " " in token:
        return "--token must be printable ASCII without spaces (it travels in an HTTP header)"
    return ""


def host_problem(host: str) -> str:
    """Why ``host`` cannot be an ``--allow-host`` value (``""`` when it can)."""
    if _HOST.match(host):
        return ""
    return f"--allow-host {host!r}: give a host name or address, optionally with its port (gpu-box, gpu-box.lan:8000, [fd00::5])"


class Guard:
    """``Guard(app, token)``: ``app`` behind the checks of this module. ``hosts``: more accepted ``Host`` values
    (``name`` or ``name:port``); ``public``: paths answered without the token."""

    def __init__(self, app: ASGIApp, token: str, *, max_body: int, hosts: Iterable[str] = (), public: Iterable[str] = ()):
        if not token:
            raise ValueError("the service needs a token")
        self.app = app
        self._token = token.encode()
        self.max_body = max_body
        self.hosts = frozenset(h.lower() for h in hosts)
        self.public = frozenset(public)
        self.refused: collections.Counter[int] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        try:
            self.check(scope)
        except Refusal as refusal:
            self.refused[refusal.status] += 1
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": str(refusal)[:120]})
            else:
                await _answer(send, refusal)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
        else:
            await self._bounded(scope, receive, send)

    # -------------------------------------------------------------- the checks, before the app sees anything
    def check(self, scope: Scope) -> None:
        headers = _headers(scope)
        host = self._check_host(scope, headers)
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{host}":
            raise Refusal(403, f"a request with Origin {origin!r} (a web page's) is refused; call the service from a "
                               "program, which sends no Origin")  # fmt: skip
        if scope.get("path") not in self.public and not self._authorized(headers):
            raise Refusal(401, "missing or wrong token: send Authorization: Bearer <token> or X-API-Key: <token>, the "
                               "token kbagent serve printed when it started (or its --token)", {"WWW-Authenticate": "Bearer"})  # fmt: skip
        if scope["type"] == "http" and _has_body(headers):
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                raise Refusal(415, f"Content-Type {kind or '(none)'!r}: send the body as JSON with Content-Type: application/json")
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > self.max_body:
                raise Refusal(413, f"a request body of {length} bytes is over the limit of {self.max_body}")

    def _check_host(self, scope: Scope, headers: dict[str, str]) -> str:
        host = headers.get("host")
        if host is None:
            raise Refusal(403, "the request has no Host header (or more than one); send the service's address as Host")
        host = host.lower()
        accepted = self._accepted_hosts(scope.get("server"))
        if host not in accepted:
            shown = ", ".join(sorted(accepted)) or "none"
            raise Refusal(403, f"Host {host!r} is not this service's address ({shown}); connect to it by its address, "
                               "or start it with --allow-host NAME")  # fmt: skip
        return host

    def _accepted_hosts(self, server: tuple[str, int | None] | None) -> set[str]:
        """The ``Host`` values that name this service: the connection's local address, its loopback names, ``hosts``."""
        port = server[1] if server else None
        names: list[str] = []
        if server is not None:
            names = [f"[{server[0]}]" if ":" in server[0] else server[0], *(LOOPBACK_NAMES if is_loopback(server[0]) else ())]
        accepted = {form for name in names for form in _with_port(name, port)}
        for host in self.hosts:
            accepted |= {host} if _PORT.search(host) else _with_port(host, port)
        return accepted

    def _authorized(self, headers: dict[str, str]) -> bool:
        given = []
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given.append(value.strip())
        if "x-api-key" in headers:
            given.append(headers["x-api-key"].strip())
        # every candidate compared, in constant time each: no early exit tells which header came closer
        return any([hmac.compare_digest(g.encode(), self._token) for g in given])

    # -------------------------------------------------------------- the body, counted as it arrives
    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = {"read": 0, "over": False, "started": False}

        async def limited_receive() -> Message:
            if state["over"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > self.max_body:  # this chunk goes no further: the app has at most max_body bytes
                    state["over"] = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if state["over"] and not state["started"]:
                return  # the app's answer to a body it never got whole: ours (413) goes instead
            state["started"] = state["started"] or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not (state["over"] and not state["started"]):
                raise
        if state["over"] and not state["started"]:
            self.refused[413] += 1
            await _answer(send, Refusal(413, f"the request body is over the limit of {self.max_body} bytes (read as it "
                                             "came: it was stopped there)"))  # fmt: skip


def _with_port(name: str, port: int | None) -> set[str]:
    if port is None:
        return {name}
    return {f"{name}:{port}", name} if port == 80 else {f"{name}:{port}"}


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; a name given twice where one is expected (Host, Origin, the token's)
    is left out, so that the request is refused rather than judged by whichever copy a later reader takes."""
    seen: dict[str, str] = {}
    twice: set[str] = set()
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        if name in seen:
            twice.add(name)
        seen[name] = raw_value.decode("latin-1")
    for name in twice & {"host", "authorization", "x-api-key", "content-type"}:
        del seen[name]
    if "origin" in twice:
        seen["origin"] = "(more than one)"
    return seen


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers


async def _answer(send: Send, refusal: Refusal) -> None:
    body = json.dumps({"error": " ".join(str(refusal).split())}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]  # an unread body is never read: the connection ends with the answer
    headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
