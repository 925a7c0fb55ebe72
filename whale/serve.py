"""An OpenAI-compatible HTTP server over the in-process transformers backend.

It speaks the subset of vLLM's completions API the rollout engine needs, with vLLM's
extensions, so ``OpenAIBackend`` works unchanged against this server or a vLLM server:
``prompt`` as token ids, ``top_k``, ``seed``, ``stop`` with ``include_stop_str_in_output``,
``return_token_ids`` (each choice carries ``token_ids`` and ``prompt_token_ids``, vLLM >= 0.10.2),
``stop_reason`` (None for eos, the matched string for a stop string) and a choice constraint
given either as ``structured_outputs: {"choice": [...]}`` (vLLM >= 0.10.2; the only form after
0.12) or as the older ``guided_choice``. ``/v1/chat/completions`` renders messages through the
model's chat template for use as a plain chat server.

Requests that arrive within ``window_s`` of each other are generated together in one backend
call. ``/v1/models`` and every response report the served weights id (``weights_id`` field and
``x-whale-weights-id`` header). ``POST /v1/load {"model_dir": ...}`` swaps the weights between
batches; vLLM has no equivalent here: its server is restarted with the new checkpoint.
"""
from __future__ import annotations

import json
import queue
import random
import threading
import time
import uuid
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from whale.backends.base import GenRequest, Sampling
from whale.backends.hf import TransformersBackend
from whale.chat import ChatFormat

WINDOW_S = 0.01  # a request waits at most this long for companions to share its batch
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
        self.worker = threading.Thread(target=self._loop, name="whale-batcher", daemon=True)
        self.worker.start()

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[tuple]:
        """(GenResult, weights id that produced it) per request, once generated."""
        futures = [Future() for _ in requests]
        for req, fut in zip(requests, futures):
            self.jobs.put((req, sampling, fut))
        return [f.result() for f in futures]

    def swap(self, model_dir: str) -> str:
        with self.lock:
            return self.backend.load(model_dir)

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
                s = job[1]
                groups.setdefault((s.temperature, s.top_p, s.top_k), []).append(job)
            with self.lock:
                for group in groups.values():
                    try:
                        results = self.backend.generate([j[0] for j in group], group[0][1])
                    except Exception as e:  # noqa: BLE001 - the error belongs to the waiting requests
                        for j in group:
                            j[2].set_exception(e)
                        continue
                    for j, res in zip(group, results):
                        j[2].set_result((res, self.backend.weights_id))


def _stop_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise HTTPError(400, "stop must be a string or a list of strings")


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
    def get(key, default):
        return default if body.get(key) is None else body[key]
    return Sampling(float(get("temperature", 1.0)), float(get("top_p", 1.0)), max(int(get("top_k", 0)), 0))


class WhaleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend: TransformersBackend, host: str, port: int, max_batch: int,
                 window_s: float, allow_load: bool, served_model_name: str | None):
        super().__init__((host, port), _Handler)
        self.backend, self.allow_load = backend, allow_load
        self.model_name = served_model_name or Path(backend.model_dir).name
        self.chat_format = ChatFormat(backend.tokenizer)
        self.batcher = Batcher(backend, max_batch, window_s)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "WhaleServer":
        """Serve from a background thread (tests, benchmarks)."""
        self._thread = threading.Thread(target=self.serve_forever, name="whale-serve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()

    @property
    def context_len(self) -> int:
        return int(getattr(self.backend.model.config, "max_position_embeddings", 2048))

    def models(self, _body=None) -> dict:
        return {"object": "list", "data": [{
            "id": self.model_name, "object": "model", "created": 0, "owned_by": "whale",
            "root": self.backend.model_dir, "max_model_len": self.context_len,
            "weights_id": self.backend.weights_id}]}

    def load(self, body: dict) -> dict:
        if not self.allow_load:
            raise HTTPError(404, "this server does not swap weights (started without /v1/load)", "NotFoundError")
        model_dir = body.get("model_dir")
        if not isinstance(model_dir, str) or not Path(model_dir).is_dir():
            raise HTTPError(400, f"model_dir must name a checkpoint directory, got {model_dir!r}")
        wid = self.batcher.swap(model_dir)
        self.chat_format = ChatFormat(self.backend.tokenizer)
        return {"weights_id": wid, "model_dir": model_dir}

    def completions(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise HTTPError(400, "prompt must be a string, a list of token ids, or a list of either")
        prompts = [self._ids(p) for p in prompt]
        out = self._generate(body, prompts, body.get("max_tokens", 16))
        for c in out["choices"]:
            c["text"] = c.pop("content")
        out["object"] = "text_completion"
        return out

    def chat(self, body: dict) -> dict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPError(400, "messages must be a non-empty list")
        ids = self.chat_format.opening(messages)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or CHAT_MAX_TOKENS
        out = self._generate(body, [ids], max_tokens)
        for c in out["choices"]:
            c["message"] = {"role": "assistant", "content": c.pop("content")}
        out["object"] = "chat.completion"
        return out

    def _ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            return self.backend.tokenizer.encode(prompt)
        vocab = self.backend.model.config.vocab_size
        if not prompt or not all(isinstance(t, int) and 0 <= t < vocab for t in prompt):
            raise HTTPError(400, f"a token-id prompt must be a non-empty list of ints in [0, {vocab})")
        return prompt

    def _generate(self, body: dict, prompts: list[list[int]], max_tokens) -> dict:
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
        choices_out = [self._choice(i, req, res, keep_stop, body.get("return_token_ids"))
                       for i, (req, (res, _)) in enumerate(zip(requests, done))]
        produced = sum(len(res.ids) for res, _ in done)
        consumed = sum(len(r.ids) for r in requests[::n])
        return {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.model_name,
                "choices": choices_out, "weights_id": done[0][1],
                "usage": {"prompt_tokens": consumed, "completion_tokens": produced,
                          "total_tokens": consumed + produced}}

    def _choice(self, index: int, req: GenRequest, res, keep_stop: bool, with_ids: bool) -> dict:
        tok = self.backend.tokenizer
        text, stop_reason = tok.decode(res.ids, skip_special_tokens=True), None
        if res.finish == "stop":  # the stop string that ended first, as the backend saw the text
            raw = tok.decode(res.ids)
            stop_reason = min(req.stop, key=lambda s: raw.find(s) + len(s) if s in raw else len(raw) + len(s) + 1)
            if not keep_stop and stop_reason in text:
                text = text[:text.find(stop_reason)]
        choice = {"index": index, "content": text, "logprobs": None,
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
        routes = {"/v1/models": self.server.models, "/health": lambda _b: {}}
        self._route(routes, None)

    def do_POST(self) -> None:
        routes = {"/v1/completions": self.server.completions, "/v1/chat/completions": self.server.chat,
                  "/v1/load": self.server.load}
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as e:
            self._send(400, {"error": {"message": f"bad JSON body: {e}", "type": "BadRequestError", "code": 400}})
            return
        self._route(routes, body)

    def _route(self, routes: dict, body) -> None:
        handler = routes.get(self.path.split("?")[0].rstrip("/"))
        try:
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
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
