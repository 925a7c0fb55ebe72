"""`whale model export`: the safetensors checkpoint every backend and the trainer start from."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("action", choices=["export"])
    p.add_argument("--source", default=None, help="`embedded`, an HF directory or a hub id")
    p.add_argument("--out", default=None)


def run(args, settings) -> None:
    from whale.model import export_model

    out = args.out or settings.model.export_dir
    wid = export_model(args.source or settings.model.source, out, settings.model.dtype)
    print(f"exported {out} (weights id {wid})")
