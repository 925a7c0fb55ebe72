"""`whale serve`: an OpenAI-compatible server over the transformers backend.

It has no authentication: it listens on loopback unless ``--host`` says otherwise, swaps weights
(``/v1/load``) only with ``--allow-load`` and only from ``data/`` and ``runs/`` of the working
directory, and refuses requests over its limits before doing any work for them.
"""
from __future__ import annotations

from whale.rollout.serve_checks import MAX_BODY_BYTES, MAX_N


def add_arguments(p) -> None:
    p.add_argument("--model-dir", default=None)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--allow-load", action="store_true",
                   help="enable POST /v1/load for checkpoints under data/ and runs/ (a run swaps weights with it)")
    p.add_argument("--max-n", type=int, default=MAX_N, help="most completions one request may ask for (prompts × n)")
    p.add_argument("--max-body-mb", type=float, default=MAX_BODY_BYTES / 2**20,
                   help="largest request body, in MiB; a larger one is refused unread (413)")


def run(args, settings) -> None:
    from whale.rollout.serve import serve
    from whale.rollout.serve_checks import ServeLimits

    limits = ServeLimits(max_n=args.max_n, max_body_bytes=int(args.max_body_mb * 2**20))
    serve(args.model_dir or settings.model.export_dir, args.host, args.port, settings.model.dtype,
          settings.backend.max_batch, allow_load=args.allow_load, limits=limits)
