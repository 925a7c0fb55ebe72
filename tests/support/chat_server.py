"""A loopback server speaking enough of the OpenAI chat-completions API (with tool calling) for
the OpenAI-compatible proposer: it replays a script of responses, records every request, and like
a real server answers 400 when an assistant's tool call is left without its tool message."""
from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)


def call(name: str, arguments: dict | str) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{next(_ids):04d}", "type": "function", "function": {"name": name, "arguments": args}}


def reply(*calls: dict, content: str | None = None, finish: str | None = None, prompt_tokens: int = 10,
          completion_tokens: int = 5) -> dict:
    finish = finish or ("tool_calls" if calls else "stop")
    message = {"role": "assistant", "content": content, **({"tool_calls": list(calls)} if calls else {})}
    return {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "model": "coder",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def failure(status: int) -> dict:
    return {"_status": status, "_body": {"error": {"message": "scripted failure", "code": status}}}


def _unanswered(messages: list) -> str | None:
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for m in messages:
        for c in m.get("tool_calls") or []:
            if c["id"] not in answered:
                return c["id"]
    return None


class ChatServer:
    def __init__(self, script: list[dict]):
        self.script, self.requests, self.headers = list(script), [], []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict, headers: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not all(k in body for k in ("model", "messages")):
                return 400, {"error": {"message": "model and messages are required"}}
            missing = _unanswered(body["messages"])
            if missing:
                return 400, {"error": {"message": f"tool call {missing} has no tool message"}}
            if not self.script:
                return 400, {"error": {"message": "chat server: script exhausted"}}
            entry = self.script.pop(0)
        return (entry["_status"], entry["_body"]) if "_status" in entry else (200, entry)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                status, body = server._next(json.loads(raw), {k.lower(): v for k, v in self.headers.items()})
                self._send(status, body)

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        return Handler
