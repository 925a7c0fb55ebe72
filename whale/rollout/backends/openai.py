"""OpenAI-compatible HTTP backend: the scale path (a vLLM server, or ``whale serve``).

Each request sends the full context as token ids and asks for the generated token ids back
(vLLM's ``return_token_ids``, vLLM >= 0.10.2), so rollouts stay token-exact: nothing is
re-tokenised on either side. The tokenizer is loaded locally from ``model_dir`` because the
engine renders chat pieces itself. Up to ``max_batch`` requests are in flight at once; the
server batches them (vLLM continuously, ``whale serve`` by arrival window).

Served weights: ``whale serve`` reports them (``weights_id`` in ``/v1/models`` and an
``x-whale-weights-id`` header on every response, checked here against what we expect). A vLLM
server does not: it serves the checkpoint it was started with, and a weight update means
restarting vLLM on the new checkpoint (``vllm serve CKPT``) before ``load(CKPT)``. Either way the
run then proves the served weights by their log-probability fingerprint (``prompt_logprobs``,
``whale/rollout/fingerprint.py``), never by a path, a name or an id the server reports.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx

from whale.model import weights_id as local_weights_id
from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling

WEIGHTS_HEADER = "x-whale-weights-id"


class ServerError(RuntimeError):
    """The server answered 5xx: its fault, not the request's (a managed server may be restarted)."""


class OpenAIBackend(Backend):
    concurrent = True

    def __init__(self, base_url: str, model_dir: str, max_batch: int = 32, timeout_s: float = 600.0):
        self.base_url = base_url.rstrip("/")
        self.max_batch = max_batch
        limits = httpx.Limits(max_connections=max_batch, max_keepalive_connections=max_batch)
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout_s, limits=limits)
        self.pool = ThreadPoolExecutor(max_workers=max_batch, thread_name_prefix="whale-openai")
        self._use_tokenizer(model_dir)
        served = self._model_entry()
        self.served_model = served["id"]
        self.weights_id = served.get("weights_id") or local_weights_id(model_dir)
        self.context_len = served.get("max_model_len")  # vLLM's and whale serve's model entry carry it

    def _use_tokenizer(self, model_dir: str) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.eos_id = self.tokenizer.eos_token_id
        self.model_dir = str(model_dir)

    def _model_entry(self) -> dict:
        reply = self._check(self.http.get("/models"), "GET /models")
        data = reply.json().get("data") or []
        if not data:
            raise RuntimeError(f"{self.base_url}/models lists no model")
        return data[0]

    def _check(self, reply: httpx.Response, what: str) -> httpx.Response:
        if reply.status_code != 200:
            kind = ServerError if reply.status_code >= 500 else RuntimeError
            raise kind(f"{self.base_url}: {what} answered {reply.status_code}: {reply.text[:500]}")
        return reply

    def load(self, model_dir: str) -> str:
        """Make the server serve ``model_dir``; return the served weights id (check it with check_serving)."""
        path = str(Path(model_dir).resolve())
        reply = self.http.post("/load", json={"model_dir": path})
        if reply.status_code in (404, 405):
            return self._restarted_on(model_dir, path)
        self._check(reply, "POST /load")
        self._use_tokenizer(model_dir)
        served = self._model_entry().get("weights_id")
        if served is None:
            raise RuntimeError(f"{self.base_url} accepted /load but reports no weights_id in /models")
        self.weights_id = served
        return self.weights_id

    def _restarted_on(self, model_dir: str, path: str) -> str:
        """No hot swap (vLLM): accept a server (re)started on ``model_dir``. That it really computes
        with those weights is not assumed: the run compares its fingerprint right after (Weights)."""
        wanted = local_weights_id(model_dir)
        served = self._model_entry()
        root = served.get("root") or served["id"]
        if wanted != self.weights_id and str(Path(root).resolve()) != path:
            raise RuntimeError(
                f"{self.base_url} cannot load new weights (no /v1/load) and serves {root!r}: restart the "
                f"server on the new checkpoint (vllm serve {path}) and call load() again")
        self._use_tokenizer(model_dir)
        self.served_model, self.weights_id = served["id"], wanted
        return self.weights_id

    def prompt_logprobs(self, probes: list[list[int]]) -> list[list[float]]:
        """The served model's log-probability of every probe token after the first (vLLM's
        ``prompt_logprobs``): the fingerprint ``whale/rollout/fingerprint.py`` checks."""
        # one request for every probe: the server scores them as one batch (vLLM and whale serve
        # take a list of token-id prompts and answer with one choice per prompt, by index)
        body = {"model": self.served_model, "prompt": probes, "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": 0}
        choices = self._check(self.http.post("/completions", json=body), "POST /completions").json()["choices"]
        out = [None] * len(probes)
        for choice in choices:
            ids, rows = probes[choice["index"]], choice.get("prompt_logprobs")
            if not rows or len(rows) != len(ids):
                raise RuntimeError(f"{self.base_url} returned no prompt_logprobs for the weight fingerprint "
                                   "(vLLM and whale serve support them)")
            out[choice["index"]] = [float(row[str(tok)]["logprob"]) for tok, row in zip(ids[1:], rows[1:],
                                                                                         strict=True)]
        if any(o is None for o in out):
            raise RuntimeError(f"{self.base_url} answered {len(choices)} choices for {len(probes)} probe prompts")
        return out

    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[Future]:
        return [self.pool.submit(self._complete, r, sampling) for r in requests]

    def _body(self, req: GenRequest, sampling: Sampling) -> dict:
        body = {
            "model": self.served_model, "prompt": req.ids, "max_tokens": req.max_new_tokens,
            "temperature": sampling.temperature, "top_p": sampling.top_p,
            # -1 disables top-k in every vLLM version (0 only in recent ones)
            "top_k": sampling.top_k if sampling.top_k > 0 else -1,
            "seed": req.seed, "stop": req.stop, "include_stop_str_in_output": True,
            "return_token_ids": True,
        }
        if req.choices:
            # vLLM >= 0.10.2 form; the older top-level `guided_choice` was removed in vLLM 0.12
            body["structured_outputs"] = {"choice": req.choices}
        return body

    def _complete(self, req: GenRequest, sampling: Sampling) -> GenResult:
        reply = self._check(self.http.post("/completions", json=self._body(req, sampling)), "POST /completions")
        served = reply.headers.get(WEIGHTS_HEADER)
        if served and served != self.weights_id:
            raise RuntimeError(f"{self.base_url} generated with weights {served}, expected "
                               f"{self.weights_id}: stale or swapped weights")
        return self._result(reply.json()["choices"][0])

    def _result(self, choice: dict) -> GenResult:
        ids = choice.get("token_ids")
        if ids is None:
            raise RuntimeError(f"{self.base_url} returned no token_ids: the server must support "
                               "return_token_ids (vLLM >= 0.10.2, or whale serve)")
        reason, stop_reason = choice.get("finish_reason"), choice.get("stop_reason")
        if reason == "length":
            return GenResult(list(ids), "length")
        if reason != "stop":
            raise RuntimeError(f"{self.base_url}: unexpected finish_reason {reason!r}")
        if isinstance(stop_reason, str):
            return GenResult(list(ids), "stop")
        # The model ended its turn: eos (stop_reason None) or another stop token id. The record
        # keeps that token, as the transformers backend does, whether or not the server sent it.
        end = self.eos_id if stop_reason is None else int(stop_reason)
        ids = list(ids) if ids and ids[-1] == end else [*ids, end]
        return GenResult(ids, "eos")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()
