"""Generation backends behind one interface (see base.py)."""
from __future__ import annotations

from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling


def make_backend(kind: str, model_dir: str, dtype: str = "float32", max_batch: int = 32,
                 base_url: str | list[str] | None = None, kv_reuse_mb: float = 0,
                 max_batch_tokens: int = 0, vllm=None, vllm_url: str | None = None,
                 max_restarts: int = 2) -> Backend:
    """A ``transformers`` backend serving ``model_dir`` in-process; a ``vllm`` one (a server started
    from ``vllm``, a ``ServerConfig``, or the external one at ``vllm_url``); or an ``openai`` one: a
    server at ``base_url``, or several (a list: rollout replicas, each with ``max_batch`` requests in
    flight)."""
    if kind == "transformers":
        from whale.rollout.backends.hf import TransformersBackend

        return TransformersBackend(model_dir, dtype=dtype, max_batch=max_batch, kv_reuse_mb=kv_reuse_mb,
                                   max_batch_tokens=max_batch_tokens)
    if kind == "openai":
        from whale.rollout.backends.openai import OpenAIBackend

        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        if len(urls) > 1:
            from whale.rollout.backends.replicas import ReplicatedBackend

            return ReplicatedBackend([OpenAIBackend(u, model_dir, max_batch=max_batch) for u in urls])
        return OpenAIBackend(urls[0], model_dir, max_batch=max_batch)
    if kind == "vllm":
        from whale.rollout.backends.vllm import VLLMBackend

        # a given url means an external server; else ``vllm`` (a ServerConfig) says how to start one
        # requests in flight: as many as the server decodes at once (an external server: max_batch)
        return VLLMBackend(model_dir, None if vllm_url else vllm, vllm_url,
                           max_batch=max_batch if vllm_url else vllm.max_num_seqs, max_restarts=max_restarts)
    raise ValueError(f"unknown backend {kind!r} (transformers, vllm or openai)")


__all__ = ["Backend", "GenRequest", "GenResult", "Sampling", "make_backend"]
