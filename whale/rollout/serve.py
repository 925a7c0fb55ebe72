"""An OpenAI-compatible HTTP server over the in-process transformers backend.

It speaks the part of vLLM's completions API the rollout engine needs, with vLLM's extensions,
so ``OpenAIBackend`` works unchanged against it or a vLLM server: ``prompt`` as token ids,
``top_k``, ``seed``, ``stop`` + ``include_stop_str_in_output``, ``return_token_ids`` (choices
carry ``token_ids``), ``stop_reason`` (None for eos, else the matched string) and a choice
constraint as ``structured_outputs: {"choice": [...]}`` (vLLM >= 0.10.2) or the older
``guided_choice`` (removed in vLLM 0.12). ``/v1/chat/completions`` serves plain chat.

Requests arriving within ``window_s`` of each other share one backend call. ``/v1/models`` and
every response report the served weights id (``weights_id``, header ``x-whale-weights-id``).
``POST /v1/load {"model_dir": ...}`` swaps weights between batches; a vLLM server is restarted.
"""
from __future__ import annotations

import json
import queue
import random
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import astuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.chat import ChatFormat

WINDOW_S = 0.01  # a batch closes when no request has arrived for this long (or when it is full)
CHAT_MAX_TOKENS = 512  # chat requests without max_tokens; vLLM would fill the context instead
WEIGHTS_HEADER = "x-whale-weights-id"


class HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.kind = status, kind


class Batcher:
    """A queue and one worker thread: close arrivals share one ``backend.generate`` call."""

    def __init__(self, backend: TransformersBackend, max_batch: int, window_s: float):
        self.backend, self.max_batch, self.window_s = backend, max_batch, window_s
        self.jobs: queue.Queue = queue.Queue()
        self.lock = threading.Lock()  # a weight swap never lands in the middle of a batch
        self.calls = 0  # backend.generate calls so far (tests check that arrivals were batched)
        self.worker = threading.Thread(target=self._loop, name="whale-batcher", daemon=True)
        self.worker.start()

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[tuple]:
        """(GenResult, weights id that produced it) per request, once generated."""
        futures = [Future() for _ in requests]
        for req, fut in zip(requests, futures, strict=False):
            self.jobs.put((req, sampling, fut))
        return [f.result() for f in futures]

    def close(self) -> None:
        self.jobs.put(None)
        self.worker.join(timeout=30)

    def _collect(self) -> list | None:
        first = self.jobs.get()
        if first is None:
            return None
        jobs = [first]
        while len(jobs) < self.max_batch:
            try:
                job = self.jobs.get(timeout=self.window_s)
            except queue.Empty:
                break
            if job is None:  # shut down after this batch
                self.jobs.put(None)
                break
            jobs.append(job)
        return jobs

    def _loop(self) -> None:
        while (jobs := self._collect()) is not None:
            groups: dict[tuple, list] = {}  # one backend call per distinct sampling
            for job in jobs:
                groups.setdefault(astuple(job[1]), []).append(job)
            with self.lock:
                for group in groups.values():
                    self.calls += 1
                    try:
                        results = self.backend.generate([j[0] for j in group], group[0][1])
                    except Exception as e:  # noqa: BLE001 - the error belongs to the waiting requests
                        for j in group:
                            j[2].set_exception(e)
                        continue
                    for j, res in zip(group, results, strict=False):
                        j[2].set_result((res, self.backend.weights_id))


def _stop_list(value) -> list[str]:
    value = [value] if isinstance(value, str) else value or []
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise HTTPError(400, "stop must be a string or a list of non-empty strings")
    return value


def _choices(body: dict) -> list[str] | None:
    structured = body.get("structured_outputs") or {}
    unsupported = sorted(k for k, v in structured.items() if k != "choice" and v is not None)
    if unsupported:
        raise HTTPError(400, f"structured_outputs: only 'choice' is supported, got {unsupported}")
    choices = structured.get("choice") or body.get("guided_choice")
    if choices is not None and (not choices or not all(isinstance(c, str) and c for c in choices)):
        raise HTTPError(400, "choice must be a non-empty list of non-empty strings")
    return choices


def _sampling(body: dict) -> Sampling:
    """vLLM's defaults for absent fields; top_k <= 0 (vLLM's -1 or 0) means no top-k."""
    t, p, k = (body.get(key) for key in ("temperature", "top_p", "top_k"))
    return Sampling(1.0 if t is None else float(t), 1.0 if p is None else float(p), max(int(k or 0), 0))


class WhaleServer(ThreadingHTTPServer):
    # listen backlog: the default 5 resets a burst of clients while generation holds the GIL
    daemon_threads, request_queue_size = True, 1024

    def __init__(self, backend: TransformersBackend, host: str, port: int, max_batch: int,
                 window_s: float, allow_load: bool, served_model_name: str | None):
        super().__init__((host, port), _Handler)
        self.backend, self.allow_load = backend, allow_load
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
        if not self.allow_load:
            raise HTTPError(404, "this server does not swap weights (started without /v1/load)", "NotFoundError")
        model_dir = body.get("model_dir")
        if not isinstance(model_dir, str) or not any(Path(model_dir).glob("*.safetensors")):
            raise HTTPError(400, f"model_dir must name a checkpoint directory with *.safetensors, got {model_dir!r}")
        with self.batcher.lock:  # between batches
            wid = self.backend.load(model_dir)
        self.chat_format = ChatFormat(self.backend.tokenizer)
        self.context_len = int(getattr(self.backend.model.config, "max_position_embeddings", 2048))
        return {"weights_id": wid, "model_dir": model_dir}

    def completions(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise HTTPError(400, "prompt must be a string, a list of token ids, or a list of either")
        prompts = [self._ids(p) for p in prompt]
        return self._generate(body, prompts, body.get("max_tokens") or 16, "text_completion", lambda t: {"text": t})

    def chat(self, body: dict) -> dict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPError(400, "messages must be a non-empty list")
        ids = self.chat_format.opening(messages)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or CHAT_MAX_TOKENS
        return self._generate(body, [ids], max_tokens, "chat.completion",
                              lambda t: {"message": {"role": "assistant", "content": t}})

    def _ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            return self.backend.tokenizer.encode(prompt)
        vocab = self.backend.model.config.vocab_size
        if not prompt or not all(isinstance(t, int) and 0 <= t < vocab for t in prompt):
            raise HTTPError(400, f"a token-id prompt must be a non-empty list of ints in [0, {vocab})")
        return prompt

    def _generate(self, body: dict, prompts: list[list[int]], max_tokens, kind: str, shape) -> dict:
        if body.get("stream"):
            raise HTTPError(400, "stream is not supported by whale serve")
        if body.get("logprobs") or body.get("echo"):
            raise HTTPError(400, "logprobs and echo are not supported by whale serve")
        n = int(body.get("n") or 1)
        if not isinstance(max_tokens, int) or max_tokens < 1 or n < 1:
            raise HTTPError(400, "max_tokens and n must be positive integers")
        longest = max(len(p) for p in prompts)
        if longest + max_tokens > self.context_len:
            raise HTTPError(400, f"prompt ({longest} tokens) + max_tokens ({max_tokens}) exceeds the "
                                 f"model's context of {self.context_len} tokens")
        seed = body.get("seed")
        seed = random.SystemRandom().getrandbits(48) if seed is None else int(seed)
        stops, choices = _stop_list(body.get("stop")), _choices(body)
        requests = [GenRequest(p, max_tokens, seed + i, stops, choices) for p in prompts for i in range(n)]
        done = self.batcher.submit(requests, _sampling(body))
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

    def log_message(self, fmt, *args) -> None:  # one line per request would drown the run's logs
        pass

    def do_GET(self) -> None:
        self._route({"/v1/models": self.server.models, "/health": lambda _b: {}}, post=False)

    def do_POST(self) -> None:
        self._route({"/v1/completions": self.server.completions, "/v1/chat/completions": self.server.chat,
                     "/v1/load": self.server.load}, post=True)

    def _json(self) -> dict:
        try:  # read the body even for a bad route: the connection is kept alive
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError as e:
            raise HTTPError(400, f"bad JSON body: {e}") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "the body must be a JSON object")
        return body

    def _route(self, routes: dict, post: bool) -> None:
        handler = routes.get(self.path.split("?")[0].rstrip("/"))
        try:
            body = self._json() if post else None
            if handler is None:
                raise HTTPError(404, f"no route {self.command} {self.path}", "NotFoundError")
            self._send(200, handler(body))
        except HTTPError as e:
            self._send(e.status, {"error": {"message": str(e), "type": e.kind, "code": e.status}})
        except Exception as e:  # noqa: BLE001 - report, keep serving
            self._send(500, {"error": {"message": f"{type(e).__name__}: {e}", "type": "InternalServerError",
                                       "code": 500}})

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(WEIGHTS_HEADER, payload.get("weights_id") or self.server.backend.weights_id)
        self.end_headers()
        self.wfile.write(data)


def make_server(model_dir: str, host: str = "127.0.0.1", port: int = 0, dtype: str = "float32",
                max_batch: int = 32, window_s: float = WINDOW_S, allow_load: bool = True,
                served_model_name: str | None = None) -> WhaleServer:
    """A server bound to (host, port) (0 = any free port); call ``.start()`` or ``.serve_forever()``."""
    backend = TransformersBackend(str(model_dir), dtype=dtype, max_batch=max_batch)
    return WhaleServer(backend, host, port, max_batch, window_s, allow_load, served_model_name)


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, dtype: str = "float32",
          max_batch: int = 32) -> None:
    """Serve ``model_dir`` until interrupted (``whale serve``)."""
    server = make_server(model_dir, host, port, dtype, max_batch)
    print(f"whale serve: {server.model_name} (weights {server.backend.weights_id}) at {server.base_url}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
