"""`whale serve`: an OpenAI-compatible server over the transformers backend."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--model-dir", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)


def run(args, params) -> None:
    from whale.rollout.serve import serve

    serve(args.model_dir or params["model"]["export_dir"], args.host, args.port,
          params["model"]["dtype"], params["backend"]["max_batch"])
