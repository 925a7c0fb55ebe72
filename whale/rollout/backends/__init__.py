"""Generation backends behind one interface (see base.py)."""
from __future__ import annotations

from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling


def make_backend(params: dict, model_dir: str) -> Backend:
    """The backend named in params.yaml (``backend.kind``), serving ``model_dir``."""
    kind = params["backend"]["kind"]
    if kind == "transformers":
        from whale.rollout.backends.hf import TransformersBackend

        return TransformersBackend(model_dir, dtype=params["model"]["dtype"], max_batch=params["backend"]["max_batch"])
    if kind == "openai":
        from whale.rollout.backends.openai import OpenAIBackend

        return OpenAIBackend(params["backend"]["base_url"], model_dir, max_batch=params["backend"]["max_batch"])
    raise ValueError(f"params.yaml backend.kind: unknown backend {kind!r} (transformers or openai)")


__all__ = ["Backend", "GenRequest", "GenResult", "Sampling", "make_backend"]
