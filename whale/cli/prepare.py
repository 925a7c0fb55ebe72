"""`whale prepare`: write the weight/harness/test splits of one domain (or all) under data/."""
from __future__ import annotations

from whale.cli.options import add_set


def add_arguments(p) -> None:
    p.add_argument("--domain", default="all")
    p.add_argument("--data-dir", default="data")
    add_set(p)


def run(args, settings) -> None:
    from domains import NAMES, get_domain

    names = NAMES if args.domain == "all" else [args.domain]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ValueError(f"unknown domain {unknown[0]!r}; choose all or one of {', '.join(NAMES)}")
    for name in names:
        if name not in settings.data:
            raise ValueError(f"params.yaml has no data.{name} split sizes")
        options = settings.generation.chess_puzzles.model_dump() if name == "chess_puzzles" else {}
        get_domain(name, args.data_dir, **options).prepare(settings.data[name].model_dump(), settings.data_seed)
        print(f"wrote {args.data_dir}/{name}/{{weight,harness,test}}.jsonl")
