"""`whale prepare`: write the weight/harness/test splits of one domain (or all) under data/."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--domain", default="all")
    p.add_argument("--data-dir", default="data")


def run(args, params) -> None:
    from domains import NAMES, get_domain

    for name in NAMES if args.domain == "all" else [args.domain]:
        options = params.get("generation", {}).get(name, {})
        get_domain(name, args.data_dir, **options).prepare(params["data"][name], params["seed"])
        print(f"wrote {args.data_dir}/{name}/{{weight,harness,test}}.jsonl")
