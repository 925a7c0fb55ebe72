"""`whale compare`: conditions of one domain side by side, final test scores with paired 95 % intervals."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--domain", required=True)
    p.add_argument("--runs", default="runs", help="folder holding <run_id>/rollouts.duckdb")
    p.add_argument("--run", action="append", default=None, help="only this run id (repeatable)")
    p.add_argument("--json", default=None, help="also write the comparison as JSON to this path")


def run(args, settings) -> None:
    from whale.files import write_json
    from whale.report.compare import compare, render
    from whale.report.data import load_runs

    runs, warnings = load_runs(args.runs, args.run)
    for w in warnings:
        print(f"warning: {w}")
    result = compare(runs, args.domain)
    print(render(result), end="")
    if args.json:
        write_json(args.json, result.as_dict())
        print(f"wrote {args.json}")
