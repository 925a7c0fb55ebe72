"""`whale report`: the offline HTML report of the runs under a folder."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--runs", default="runs", help="folder holding <run_id>/rollouts.duckdb")
    p.add_argument("--out", default="runs/report")
    p.add_argument("--run", action="append", default=None, help="only this run id (repeatable)")


def run(args, settings) -> None:
    from whale.report import write_report

    html = write_report(args.runs, args.out, args.run)
    print(f"wrote {html} (PNGs, metrics.json, curves.csv, steps.csv beside it)")
