"""A loopback HTTP server that speaks enough of Anthropic's Messages API for the real SDK.

Tests point ``anthropic.Anthropic(base_url=srv.base_url, api_key="test")`` at it. It replays a
script: each POST /v1/messages takes the next entry, which is either a Messages response (built
with ``message``) or an error (built with ``error``). Every request body is recorded so a test
can assert what the client sent back (tool_result blocks, system prompt, tools).

Like the real API it answers 400 when a tool_use block is left without its tool_result in the
next user message, and 401 without credentials (``x-api-key`` or ``authorization``).
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def message(*content: dict, input_tokens: int = 10, output_tokens: int = 5,
            stop_reason: str | None = None, model: str = "claude-test") -> dict:
    """A Messages response; stop_reason defaults to tool_use when a block calls a tool."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant", "model": model,
        "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def error(status: int, kind: str = "api_error", msg: str = "scripted failure",
          headers: dict | None = None, delay_s: float = 0.0) -> dict:
    """An HTTP error reply (429 rate_limit_error, 529 overloaded_error, 500 api_error ...)."""
    return {"_status": status, "_headers": headers or {}, "_delay_s": delay_s,
            "_body": {"type": "error", "error": {"type": kind, "message": msg}}}


def slow(response: dict, delay_s: float) -> dict:
    """``response`` sent after ``delay_s`` seconds (to make a client with a short timeout give up)."""
    return {"_status": 200, "_headers": {}, "_delay_s": delay_s, "_body": response}


def _unanswered_tool_use(messages: list) -> str | None:
    """The first tool_use id whose tool_result is missing from the following user message."""
    for i, m in enumerate(messages):
        content = m.get("content")
        if m.get("role") != "assistant" or not isinstance(content, list):
            continue
        wanted = [b["id"] for b in content if b.get("type") == "tool_use"]
        nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
        got = {b.get("tool_use_id") for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"}
        missing = [w for w in wanted if w not in got]
        if missing:
            return missing[0]
    return None


class MessagesServer:
    """``with MessagesServer(script) as srv:`` serves the script on ``srv.base_url``."""

    def __init__(self, script: list[dict]):
        self.script = list(script)
        self.requests: list[dict] = []  # request bodies, in arrival order
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def remaining(self) -> int:
        return len(self.script)

    def __enter__(self) -> MessagesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_reply(self, body: dict, headers: dict) -> tuple[int, dict, dict, float]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not (headers.get("x-api-key") or headers.get("authorization")):
                return 401, {}, _err("authentication_error", "no credentials (x-api-key or authorization)"), 0.0
            if not all(k in body for k in ("model", "max_tokens", "messages")):
                return 400, {}, _err("invalid_request_error", "model, max_tokens and messages are required"), 0.0
            missing = _unanswered_tool_use(body["messages"])
            if missing:
                return 400, {}, _err("invalid_request_error", f"tool_use ids without tool_result: {missing}"), 0.0
            if not self.script:
                return 400, {}, _err("invalid_request_error", "messages server: script exhausted"), 0.0
            entry = self.script.pop(0)
        if "_status" in entry:
            return entry["_status"], entry["_headers"], entry["_body"], entry["_delay_s"]
        return 200, {}, entry, 0.0

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, {}, _err("not_found_error", f"no route {self.path}"))
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    return self._send(400, {}, _err("invalid_request_error", "body is not JSON"))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra, reply, delay = server._next_reply(body, headers)
                if delay:
                    time.sleep(delay)
                self._send(status, extra, reply)

            def _send(self, status: int, extra: dict, body: dict) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in extra.items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to deliver

            def log_message(self, *args) -> None:
                pass

        return Handler


def _err(kind: str, msg: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": msg}}
