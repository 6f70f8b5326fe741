"""The service's guard by itself, as an ASGI middleware around a recording app: which requests reach the app, what
the refused ones are answered, and how much of a body is ever read. (tests/test_serve.py: the same through uvicorn.)"""

from __future__ import annotations

import asyncio
import json

import pytest

from kbagent.serve.guard import Guard, host_problem, new_token, token_problem

TOKEN = "guard-token-0123456789"
LIMIT = 100_000
CHUNK = 4096


class App:
    """Reads the whole body, then answers 200; remembers what it read."""

    def __init__(self, fail_on_disconnect: bool = False):
        self.calls = 0
        self.body = b""
        self.fail_on_disconnect = fail_on_disconnect

    async def __call__(self, scope, receive, send):
        self.calls += 1
        if scope["type"] == "lifespan":
            return
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if self.fail_on_disconnect:
                    raise RuntimeError("client went away")
                break
            self.body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


class Endless:
    """receive(): a chunked body that never ends, each call counted."""

    def __init__(self):
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        assert self.calls < 10_000, "read far past the limit"
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": True}


def call(guard, headers, *, server=("127.0.0.1", 8000), body=b"", receive=None, path="/v1/run_kernel", kind="http"):
    """Run one request through ``guard``: its status (or websocket close code), headers and JSON body."""
    scope = {"type": kind, "method": "POST", "path": path, "server": server,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}  # fmt: skip
    sent = []

    async def one_message():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(guard(scope, receive or one_message, send))
    if kind == "websocket":
        return sent[0]["code"], {}, {}
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, data


def good(host="127.0.0.1:8000", **extra):
    return [("Host", host), ("Authorization", f"Bearer {TOKEN}"), ("Content-Type", "application/json"), *extra.items()]


def guarded(app=None, **kw):
    return Guard(app or App(), TOKEN, max_body=LIMIT, public=("/healthz",), **kw)


def refusal(guard, headers, status, **kw) -> str:
    got, head, data = call(guard, headers, **kw)
    assert got == status, data
    assert head["content-type"] == "application/json" and head["connection"] == "close"
    error = json.loads(data)["error"]
    assert error and "\n" not in error
    assert guard.app.calls == 0  # the app never saw it
    return error


def test_a_good_request_reaches_the_app_whole():
    guard = guarded()
    status, _, data = call(guard, [*good(), ("Content-Length", "11")], body=b'{"a": "b"}\n')
    assert (status, data, guard.app.body, guard.refused) == (200, b"ok", b'{"a": "b"}\n', {})


@pytest.mark.parametrize(
    ("headers", "server", "status", "says"),
    [
        ([("Authorization", f"Bearer {TOKEN}")], ("127.0.0.1", 8000), 403, "no Host header"),
        ([*good(), ("Host", "127.0.0.1:8000")], ("127.0.0.1", 8000), 403, "no Host header (or more than one)"),
        (good("evil.example:8000"), ("127.0.0.1", 8000), 403, "Host 'evil.example:8000' is not this service's address"),
        (good("localhost:8001"), ("127.0.0.1", 8000), 403, "127.0.0.1:8000, [::1]:8000, localhost:8000"),
        (good("localhost:8000"), ("10.0.0.5", 8000), 403, "is not this service's address (10.0.0.5:8000)"),
        (good(Origin="http://evil.example"), ("127.0.0.1", 8000), 403, "Origin 'http://evil.example' (a web page's)"),
        (good(Origin="https://127.0.0.1:8000"), ("127.0.0.1", 8000), 403, "Origin 'https://127.0.0.1:8000'"),
        (good()[:1], ("127.0.0.1", 8000), 401, "missing or wrong token"),
        ([good()[0], ("Authorization", f"Bearer {TOKEN}x")], ("127.0.0.1", 8000), 401, "missing or wrong token"),
        ([good()[0], ("X-API-Key", f" {TOKEN[:-1]}")], ("127.0.0.1", 8000), 401, "missing or wrong token"),
        ([*good(), ("Authorization", "Bearer other")], ("127.0.0.1", 8000), 401, "missing or wrong token"),  # twice: ambiguous
        ([*good()[:2], ("Content-Length", "2")], ("127.0.0.1", 8000), 415, "Content-Type '(none)'"),
        ([*good()[:2], ("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")], ("127.0.0.1", 8000), 415,
         "Content-Type 'text/plain'"),
        ([*good(), ("Content-Length", str(LIMIT + 1))], ("127.0.0.1", 8000), 413, f"{LIMIT + 1} bytes is over the limit of {LIMIT}"),
    ],
)  # fmt: skip
def test_a_refused_request_never_reaches_the_app(headers, server, status, says):
    guard = guarded()
    assert says in refusal(guard, headers, status, server=server)
    assert guard.refused == {status: 1}


def test_the_hosts_that_name_the_service():
    for server, hosts in [
        (("127.0.0.1", 8000), ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LocalHost:8000"]),
        (("::1", 8000), ["[::1]:8000", "localhost:8000", "127.0.0.1:8000"]),
        (("127.0.0.1", 80), ["127.0.0.1", "localhost:80", "[::1]"]),  # port 80: a client may leave it out
        (("10.0.0.5", 8000), ["10.0.0.5:8000", "gpu-box:8000", "proxy.lan:443"]),  # --allow-host gpu-box proxy.lan:443
    ]:
        for host in hosts:
            status, _, _ = call(guarded(hosts=("gpu-box", "proxy.lan:443")), good(host), server=server)
            assert status == 200, (server, host)
    for host in ("gpu-box", "proxy.lan:8000", "10.0.0.5"):
        assert call(guarded(hosts=("gpu-box", "proxy.lan:443")), good(host), server=("10.0.0.5", 8000))[0] == 403, host


def test_the_token_as_either_header_and_health_without_it():
    for header in [("Authorization", f"Bearer {TOKEN}"), ("Authorization", f"BEARER {TOKEN} "), ("X-API-Key", TOKEN)]:
        assert call(guarded(), [("Host", "127.0.0.1:8000"), header])[0] == 200, header
    assert call(guarded(), [("Host", "127.0.0.1:8000")], path="/healthz")[0] == 200
    assert call(guarded(), [("Host", "evil:8000")], path="/healthz")[0] == 403  # public is not unchecked
    same_origin = [("Host", "localhost:8000"), ("Origin", "http://localhost:8000"), ("X-API-Key", TOKEN)]
    assert call(guarded(), same_origin)[0] == 200


@pytest.mark.parametrize("fails", [False, True])
def test_an_endless_body_is_read_to_the_limit_and_no_further(fails):
    guard, body = guarded(App(fail_on_disconnect=fails)), Endless()
    status, head, data = call(guard, [*good(), ("Transfer-Encoding", "chunked")], receive=body)
    assert (status, head["connection"]) == (413, "close") and f"over the limit of {LIMIT} bytes" in json.loads(data)["error"]
    assert len(guard.app.body) <= LIMIT  # the app never held more than the limit
    assert body.calls == LIMIT // CHUNK + 1  # the chunk that crossed it was the last one read
    assert guard.refused == {413: 1}


def test_a_websocket_is_checked_too_and_lifespan_passes():
    assert call(guarded(), [("Host", "evil:8000"), ("X-API-Key", TOKEN)], kind="websocket")[0] == 1008
    guard = guarded()

    async def nothing():
        return {"type": "lifespan.startup"}

    asyncio.run(guard({"type": "lifespan"}, nothing, nothing))
    assert guard.app.calls == 1


def test_tokens_and_allowed_hosts_checked_at_start():
    tokens = {new_token() for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) >= 43 and not token_problem(t) for t in tokens)
    assert "at least 16" in token_problem("x" * 15) and "without spaces" in token_problem("x" * 10 + " " + "y" * 10)
    assert "printable ASCII" in token_problem("é" * 20)
    assert [h for h in ("gpu-box", "gpu-box.lan:8000", "[fd00::5]:80", "10.0.0.5") if host_problem(h)] == []
    assert all(host_problem(h) for h in ("", "a b", "evil:port", "x/y", "-lead"))
    with pytest.raises(ValueError, match="needs a token"):
        Guard(App(), "", max_body=LIMIT)
