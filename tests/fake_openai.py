"""A small OpenAI-compatible chat-completions server for tests (127.0.0.1 only, no key checks).

    with FakeOpenAIServer(["hello", Status(429, retry_after=0), Hang(30)]) as server:
        ...  # point a client at server.base_url; server.requests holds what it received

Each request takes the next action (the last one repeated):

* ``str`` - a normal 200 reply with that text (``finish_reason`` "stop");
* :class:`Reply` - a 200 reply with a chosen finish reason and token counts;
* :class:`ToolCalls` - a 200 reply that calls tools (``finish_reason`` "tool_calls");
* :class:`Status` - an error reply with that HTTP status (``Retry-After`` when asked);
* :class:`Hang` - wait (cut short when the server shuts down), then close without answering;
* a callable ``(request_json) -> action`` - decides per request.

GET requests take no action: ``GET /v1/models`` lists ``models`` when given (else 404); each GET is
recorded in ``gets``.

The server is bounded: it answers at most ``max_requests`` requests (503 after that) and shuts
itself down after ``lifetime`` seconds; leaving the ``with`` block stops it and joins its threads
quickly even while a handler hangs.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")


@dataclasses.dataclass
class Reply:
    text: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None  # default: characters of the messages // 4
    completion_tokens: int | None = None  # default: characters of the text // 4


@dataclasses.dataclass
class ToolCalls:
    calls: list[tuple[str, dict[str, Any]]]  # (function name, arguments)


@dataclasses.dataclass
class Status:
    code: int
    retry_after: float | None = None  # seconds, sent as a Retry-After header when set
    message: str = ""


@dataclasses.dataclass
class Hang:
    seconds: float


Action = str | Reply | ToolCalls | Status | Hang | Callable[[dict[str, Any]], Any]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeOpenAIServer

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        self.fake._handlers.append(thread)
        thread.start()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing idles in keep-alive

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _send_reply(self, body: dict[str, Any], payload: dict[str, Any]) -> None:
        """A completion as JSON, or as server-sent chunks when the request asks for ``stream``."""
        if not body.get("stream"):
            self._send_json(200, payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for chunk in _chunks(payload):
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
        except OSError:
            pass

    def _send_json(self, code: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def _send_error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        error = {"message": message, "type": _ERROR_TYPES.get(code, "server_error"), "param": None, "code": str(code)}
        self._send_json(code, {"error": error}, headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        fake._record_get(path, {k.lower(): v for k, v in self.headers.items()})
        if fake.models is not None and path in MODELS_PATHS:
            self._send_json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
            return
        self._send_error(404, f"no route GET {path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        index = fake._record(path, {k.lower(): v for k, v in self.headers.items()}, body)
        if path not in CHAT_PATHS:
            self._send_error(404, f"no route POST {path}")
            return
        if not isinstance(body, dict):
            self._send_error(400, "request body is not a JSON object")
            return
        if index >= fake.max_requests:
            self._send_error(503, f"fake server: request limit {fake.max_requests} reached")
            return
        action = fake._action(index)
        if callable(action) and not isinstance(action, (Reply, Status, Hang)):
            action = action(body)
        self._perform(action, body)

    def _perform(self, action: Any, body: dict[str, Any]) -> None:
        fake = self.server.fake
        if isinstance(action, str):
            action = Reply(action)
        if isinstance(action, Hang):
            fake._stop.wait(action.seconds)
            self.close_connection = True
            return  # nothing written: the client sees the connection close (or times out first)
        if isinstance(action, Status):
            headers = {}
            if action.retry_after is not None:
                seconds = action.retry_after
                headers["Retry-After"] = str(int(seconds)) if float(seconds).is_integer() else str(seconds)
            self._send_error(action.code, action.message or f"fake server: status {action.code}", headers)
            return
        if isinstance(action, ToolCalls):
            calls = [{"id": f"call_{fake.served}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                     for i, (name, args) in enumerate(action.calls)]  # fmt: skip
            self._send_reply(body, _completion(body, fake.served, {"role": "assistant", "content": None, "tool_calls": calls},
                                               "tool_calls", 10, 10))  # fmt: skip
            return
        if isinstance(action, Reply):
            messages = body.get("messages") or []
            prompt = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict)) // 4
            prompt = action.prompt_tokens if action.prompt_tokens is not None else prompt
            completion = action.completion_tokens if action.completion_tokens is not None else len(action.text) // 4
            message = {"role": "assistant", "content": action.text}
            self._send_reply(body, _completion(body, fake.served, message, action.finish_reason, prompt, completion))
            return
        self._send_error(500, f"fake server: bad action {action!r}")


def _completion(body: dict[str, Any], served: int, message: dict[str, Any], finish_reason: str, prompt: int, completion: int) -> dict:
    return {
        "id": f"chatcmpl-fake{served}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "fake-model")),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def _chunks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as stream chunks: the message as one delta, then the finish reason with the usage."""
    choice = payload["choices"][0]
    message = dict(choice["message"])
    if message.get("tool_calls"):
        message["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
    head = {k: payload[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    return [{**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}], "usage": payload["usage"]}]


class FakeOpenAIServer:
    def __init__(
        self, actions: Action | list[Action], *, max_requests: int = 50, lifetime: float = 120.0, models: list[str] | None = None
    ):
        if not isinstance(actions, list):
            actions = [actions]
        if not actions:
            raise ValueError("FakeOpenAIServer needs at least one action")
        self.actions = actions
        self.max_requests = max_requests
        self.lifetime = lifetime
        self.requests: list[dict[str, Any]] = []  # {"path", "headers" (lower-case names), "json"} per POST, in order
        self.gets: list[dict[str, Any]] = []  # {"path", "headers"} per GET (they take no action)
        self.models = models  # served on GET /v1/models when set; else GET is a 404
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        self._handlers: list[threading.Thread] = []

    # --- used by the handler -------------------------------------------------------------------
    def _record(self, path: str, headers: dict[str, str], body: Any) -> int:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "json": body})
            return len(self.requests) - 1

    def _record_get(self, path: str, headers: dict[str, str]) -> None:
        with self._lock:
            self.gets.append({"path": path, "headers": headers})

    def _action(self, index: int) -> Any:
        return self.actions[min(index, len(self.actions) - 1)]

    @property
    def served(self) -> int:
        return len(self.requests)

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "use FakeOpenAIServer as a context manager"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed or self._httpd is None:
                return
            self._closed = True
        self._stop.set()  # wakes hanging handlers
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        deadline = time.monotonic() + 2
        for thread in list(self._handlers):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
