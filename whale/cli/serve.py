"""`whale serve`: an OpenAI-compatible server over the transformers backend."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--model-dir", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)


def run(args, settings) -> None:
    from whale.rollout.serve import serve

    serve(args.model_dir or settings.model.export_dir, args.host, args.port,
          settings.model.dtype, settings.backend.max_batch)
