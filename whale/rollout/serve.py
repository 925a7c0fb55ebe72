"""An OpenAI-compatible HTTP server over the in-process transformers backend.

It speaks the part of vLLM's completions API the rollout engine needs, with vLLM's extensions,
so ``OpenAIBackend`` works unchanged against it or a vLLM server: ``prompt`` as token ids,
``top_k``, ``seed``, ``stop`` + ``include_stop_str_in_output``, ``return_token_ids`` (choices
carry ``token_ids``), ``stop_reason`` (None for eos, else the matched string) and a choice
constraint as ``structured_outputs: {"choice": [...]}`` (vLLM >= 0.10.2) or the older
``guided_choice`` (removed in vLLM 0.12). ``/v1/chat/completions`` serves plain chat.

Requests arriving within ``window_s`` of each other share one backend call. ``/v1/models`` and
every response report the served weights id (``weights_id``, header ``x-whale-weights-id``).
``POST /v1/load {"model_dir": ...}`` swaps weights between batches, only on a server started with
``allow_load`` and only from directories under ``load_roots``; a vLLM server is restarted. There
is no authentication: the server binds to loopback unless told otherwise, and ``serve_checks``
bounds what one request may cost before it is read, tokenised or generated.
"""
from __future__ import annotations

import json
import random
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from whale.rollout import serve_checks as checks
from whale.rollout.backends.base import GenRequest
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.batcher import Batcher
from whale.rollout.chat import ChatFormat
from whale.rollout.fingerprint import local_logprobs
from whale.rollout.serve_checks import HTTPError, ServeLimits

WINDOW_S = 0.01  # a batch closes when no request has arrived for this long (or when it is full)
CHAT_MAX_TOKENS = 512  # chat requests without max_tokens; vLLM would fill the context instead
WEIGHTS_HEADER = "x-whale-weights-id"


class WhaleServer(ThreadingHTTPServer):
    # listen backlog: the default 5 resets a burst of clients while generation holds the GIL
    daemon_threads, request_queue_size = True, 1024

    def __init__(self, backend: TransformersBackend, host: str, port: int, max_batch: int,
                 window_s: float, allow_load: bool, served_model_name: str | None,
                 limits: ServeLimits, load_roots: tuple[Path, ...]):
        super().__init__((host, port), _Handler)
        self.backend, self.allow_load, self.load_roots, self.limits = backend, allow_load, load_roots, limits
        self.model_name = served_model_name or Path(backend.model_dir).name
        self.chat_format = ChatFormat(backend.tokenizer)
        self.batcher = Batcher(backend, max_batch, window_s)
        self.context_len = int(getattr(backend.model.config, "max_position_embeddings", 2048))

    @property
    def base_url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}/v1"

    def start(self) -> WhaleServer:
        """Serve from a background thread (tests, benchmarks)."""
        threading.Thread(target=self.serve_forever, name="whale-serve", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()

    def models(self, _body=None) -> dict:
        entry = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "whale", "root":
                 self.backend.model_dir, "max_model_len": self.context_len, "weights_id": self.backend.weights_id}
        return {"object": "list", "data": [entry]}

    def load(self, body: dict) -> dict:
        if not self.allow_load:  # 404 as on vLLM: OpenAIBackend.load then accepts a server already on the checkpoint
            raise HTTPError(404, "this server does not swap weights: start it with --allow-load to enable "
                                 "/v1/load, or restart it on the new checkpoint", "NotFoundError")
        model_dir = checks.load_dir(body.get("model_dir"), self.load_roots)
        with self.batcher.lock:  # between batches
            wid = self.backend.load(model_dir)
        self.chat_format = ChatFormat(self.backend.tokenizer)
        self.context_len = int(getattr(self.backend.model.config, "max_position_embeddings", 2048))
        return {"weights_id": wid, "model_dir": model_dir}

    def completions(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if isinstance(prompt, str) or checks.is_token_ids(prompt):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise HTTPError(400, "prompt must be a string, a list of token ids, or a list of either")
        n, max_tokens = self._asked(body, len(prompt), "max_tokens", 16)
        for p in prompt:  # sizes before any tokenising
            checks.prompt_size(p, self.limits, self.context_len)
        prompts = [self._ids(p) for p in prompt]
        out = self._generate(body, prompts, n, max_tokens, "text_completion", lambda t: {"text": t})
        if body.get("prompt_logprobs") is not None:  # vLLM's field: each prompt token's log-probability
            with self.batcher.lock:
                logps = local_logprobs(self.backend.model, prompts)
            for choice in out["choices"]:
                ids, lp = prompts[choice["index"] // n], logps[choice["index"] // n]
                choice["prompt_logprobs"] = [None] + [{str(t): {"logprob": v, "rank": None}}
                                                      for t, v in zip(ids[1:], lp, strict=True)]
        return out

    def chat(self, body: dict) -> dict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPError(400, "messages must be a non-empty list")
        key = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
        n, max_tokens = self._asked(body, 1, key, CHAT_MAX_TOKENS)
        checks.prompt_size(messages, self.limits, self.context_len)
        ids = self.chat_format.opening(messages)
        return self._generate(body, [ids], n, max_tokens, "chat.completion",
                              lambda t: {"message": {"role": "assistant", "content": t}})

    def _asked(self, body: dict, prompts: int, key: str, default: int) -> tuple[int, int]:
        """(n, max_tokens) of a request, within the server's limits."""
        n = checks.completions_asked(body, prompts, self.limits)
        cap = self.limits.max_tokens or self.context_len
        why = "the model's context length" if self.limits.max_tokens is None else "the server's max_tokens limit"
        return n, checks.positive_int(body, key, min(default, cap), cap, why)

    def _ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            return self.backend.tokenizer.encode(prompt)
        vocab = self.backend.model.config.vocab_size
        if not prompt or not all(isinstance(t, int) and 0 <= t < vocab for t in prompt):
            raise HTTPError(400, f"a token-id prompt must be a non-empty list of ints in [0, {vocab})")
        return prompt

    def _generate(self, body: dict, prompts: list[list[int]], n: int, max_tokens: int, kind: str, shape) -> dict:
        longest = max(len(p) for p in prompts)
        if longest + max_tokens > self.context_len:
            raise HTTPError(400, f"prompt ({longest} tokens) + max_tokens ({max_tokens}) exceeds the "
                                 f"model's context of {self.context_len} tokens")
        seed = checks.seed(body, lambda: random.SystemRandom().getrandbits(48))
        stops, choices = checks.stop_list(body.get("stop")), checks.choices(body)
        requests = [GenRequest(p, max_tokens, seed + i, stops, choices) for p in prompts for i in range(n)]
        done = self.batcher.submit(requests, checks.sampling(body))
        keep_stop = body.get("include_stop_str_in_output", False)
        choices_out = [self._choice(i, req, res, keep_stop, body.get("return_token_ids"), shape)
                       for i, (req, (res, _)) in enumerate(zip(requests, done, strict=False))]
        produced = sum(len(res.ids) for res, _ in done)
        consumed = sum(len(r.ids) for r in requests[::n])
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
                "model": self.model_name,
                "choices": choices_out, "weights_id": done[0][1],
                "usage": {"prompt_tokens": consumed, "completion_tokens": produced,
                          "total_tokens": consumed + produced}}

    def _choice(self, index: int, req: GenRequest, res, keep_stop: bool, with_ids: bool, shape) -> dict:
        tok = self.backend.tokenizer
        text, stop_reason = tok.decode(res.ids, skip_special_tokens=True), None
        if res.finish == "stop":  # the stop string that ended first, as the backend saw the text
            raw = tok.decode(res.ids)
            stop_reason = min(req.stop, key=lambda s: raw.find(s) + len(s) if s in raw else len(raw) + len(s) + 1)
            if not keep_stop and stop_reason in text:
                text = text[:text.find(stop_reason)]
        choice = {"index": index, **shape(text), "logprobs": None,
                  "finish_reason": "length" if res.finish == "length" else "stop", "stop_reason": stop_reason}
        if with_ids:
            choice["token_ids"], choice["prompt_token_ids"] = res.ids, req.ids
        return choice


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    server: WhaleServer
    unread_body = False  # a refused POST body left in the socket: the connection closes after the answer

    def log_message(self, fmt, *args) -> None:  # one line per request would drown the run's logs
        pass

    def do_GET(self) -> None:
        self._route({"/v1/models": self.server.models, "/health": lambda _b: {}}, post=False)

    def do_POST(self) -> None:
        self._route({"/v1/completions": self.server.completions, "/v1/chat/completions": self.server.chat,
                     "/v1/load": self.server.load}, post=True)

    def handle_expect_100(self) -> bool:
        """Refuse an oversized body before the client sends it (curl asks first for large bodies)."""
        try:
            checks.body_length(self.headers, self.server.limits.max_body_bytes)
        except HTTPError as e:
            self.unread_body = True
            self._refuse(e)
            return False
        return super().handle_expect_100()

    def _json(self) -> dict:
        size = checks.body_length(self.headers, self.server.limits.max_body_bytes)  # before reading any of it
        raw = self.rfile.read(size)  # read even for a bad route: the connection is kept alive
        self.unread_body = False
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            raise HTTPError(400, f"bad JSON body: {e}") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "the body must be a JSON object")
        return body

    def _route(self, routes: dict, post: bool) -> None:
        handler = routes.get(self.path.split("?")[0].rstrip("/"))
        self.unread_body = post
        try:
            body = self._json() if post else None
            if handler is None:
                raise HTTPError(404, f"no route {self.command} {self.path}", "NotFoundError")
            self._send(200, handler(body))
        except HTTPError as e:
            self._refuse(e)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            self._send(500, {"error": {"message": f"{type(e).__name__}: {e}", "type": "InternalServerError",
                                       "code": 500}})

    def _refuse(self, e: HTTPError) -> None:
        self._send(e.status, {"error": {"message": str(e), "type": e.kind, "code": e.status}})

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(WEIGHTS_HEADER, payload.get("weights_id") or self.server.backend.weights_id)
        if self.unread_body:  # the next request would be parsed from the middle of this one's body
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


def make_server(model_dir: str, host: str = "127.0.0.1", port: int = 0, dtype: str = "float32",
                max_batch: int = 32, window_s: float = WINDOW_S, allow_load: bool = False,
                served_model_name: str | None = None, limits: ServeLimits | None = None,
                load_roots: tuple[str | Path, ...] | None = None) -> WhaleServer:
    """A server bound to (host, port) (0 = any free port); call ``.start()`` or ``.serve_forever()``.

    ``/v1/load`` works only with ``allow_load`` and for directories under ``load_roots`` (default:
    ``data/`` and ``runs/`` of the working directory).
    """
    backend = TransformersBackend(str(model_dir), dtype=dtype, max_batch=max_batch)
    roots = tuple(Path(r) for r in load_roots) if load_roots is not None else checks.default_load_roots()
    return WhaleServer(backend, host, port, max_batch, window_s, allow_load, served_model_name,
                       limits or ServeLimits(), roots)


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, dtype: str = "float32",
          max_batch: int = 32, allow_load: bool = False, limits: ServeLimits | None = None,
          load_roots: tuple[str | Path, ...] | None = None) -> None:
    """Serve ``model_dir`` until interrupted (``whale serve``)."""
    server = make_server(model_dir, host, port, dtype, max_batch, allow_load=allow_load, limits=limits,
                         load_roots=load_roots)
    if not checks.is_loopback(host):
        print(f"whale serve: WARNING: listening on {host}, beyond this machine; the server has no "
              "authentication, so anyone who can reach it can use it", file=sys.stderr, flush=True)
    print(f"whale serve: {server.model_name} (weights {server.backend.weights_id}) at {server.base_url}"
          + (f"; /v1/load reads from {', '.join(map(str, server.load_roots))}" if allow_load else ""), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
