"""The `whale` command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from whale.params import load_params

COMMANDS = {}


def command(fn):
    COMMANDS[fn.__name__.removeprefix("cmd_").replace("_", "-")] = fn
    return fn


@command
def cmd_prepare(args, params):
    from domains import NAMES, get_domain

    for name in NAMES if args.domain == "all" else [args.domain]:
        options = params.get("generation", {}).get(name, {})
        get_domain(name, args.data_dir, **options).prepare(params["data"][name], params["seed"])
        print(f"wrote {args.data_dir}/{name}/{{weight,harness,test}}.jsonl")


@command
def cmd_model(args, params):
    from whale.model import export_model

    out = args.out or params["model"]["export_dir"]
    wid = export_model(args.source or params["model"]["source"], out, params["model"]["dtype"])
    print(f"exported {out} (weights id {wid})")


@command
def cmd_eval(args, params):
    from whale.evaluate import evaluate

    m = evaluate(params, args.domain, args.harness, args.split, args.k or params["eval"]["k"], args.run, args.model)
    print(json.dumps(m, indent=2, sort_keys=True))


@command
def cmd_run(args, params):
    from flows.whale import whale

    overrides = json.loads(args.set) if args.set else None
    result = whale(domain=args.domain, condition=args.condition, run_id=args.run, profile=args.profile,
                   overrides=overrides, params_path=args.params)
    print(json.dumps(result, indent=2, sort_keys=True))
    if not args.no_report:
        from whale.report import write_report

        print(f"report: {write_report(str(Path(result['run_dir']).parent))}")


@command
def cmd_report(args, params):
    from whale.report import write_report

    html = write_report(args.runs, args.out, args.run)
    print(f"wrote {html} (PNGs, metrics.json, curves.csv beside it)")


@command
def cmd_harness(args, params):
    from whale.harness_cli import run_command, run_dir_for

    print(run_command(args.action, run_dir_for(args.runs, args.run), args.ids), end="")


@command
def cmd_sql(args, params):
    from whale.sql import run_sql

    print(run_sql(args.query, args.runs))


@command
def cmd_serve(args, params):
    from whale.serve import serve

    serve(args.model_dir or params["model"]["export_dir"], args.host, args.port,
          params["model"]["dtype"], params["backend"]["max_batch"])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="whale", description="WHALE: weight-harness alternating learning")
    p.add_argument("--params", default="params.yaml", help="configuration file")
    p.add_argument("--profile", default=None, help="profile overlay from params.yaml (default: its `profile`)")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("prepare", help="generate a domain's weight/harness/test splits under data/")
    s.add_argument("--domain", default="all")
    s.add_argument("--data-dir", default="data")

    s = sub.add_parser("model", help="model utilities")
    s.add_argument("action", choices=["export"])
    s.add_argument("--source", default=None, help="`embedded`, an HF directory or a hub id")
    s.add_argument("--out", default=None)

    s = sub.add_parser("eval", help="roll out a harness on a split and report mean@k")
    s.add_argument("--domain", required=True)
    s.add_argument("--harness", required=True, help="path of a harness .py file")
    s.add_argument("--split", default="test", choices=["weight", "harness", "test"])
    s.add_argument("-k", type=int, default=None, help="samples per example (default eval.k)")
    s.add_argument("--run", default=None, help="run id (default eval-<domain>)")
    s.add_argument("--model", default=None, help="checkpoint directory (default model.export_dir)")

    s = sub.add_parser("run", help="run (or resume) one condition on one domain as a Prefect flow")
    s.add_argument("--domain", default="math_reasoning")
    s.add_argument("--condition", default="adaptive_whale",
                   choices=["weight_only", "harness_only", "whale", "adaptive_whale", "stagewise", "prompt_only"])
    s.add_argument("--run", default=None, help="run id (default <domain>-<condition>); rerun to resume")
    s.add_argument("--no-report", action="store_true", help="do not write runs/report at the end")
    s.add_argument("--set", default=None, help="JSON overrides of params.yaml, e.g. '{\"schedule\": {\"E\": 0.2}}'")

    s = sub.add_parser("report", help="offline HTML report (PNGs embedded), metrics.json and curves.csv of the runs")
    s.add_argument("--runs", default="runs", help="folder holding <run_id>/rollouts.duckdb")
    s.add_argument("--out", default="runs/report")
    s.add_argument("--run", action="append", default=None, help="only this run id (repeatable)")

    s = sub.add_parser("harness", help="inspect a run's harness archive (read-only)")
    s.add_argument("action", choices=["show", "diff", "lineage"],
                   help="show ID | diff A B | lineage [ID] (tree from the seeds, or from ID)")
    s.add_argument("ids", nargs="*", help="harness ids or unique prefixes of them")
    s.add_argument("--run", default=None, help="run id (default: the only run under --runs)")
    s.add_argument("--runs", default="runs")

    s = sub.add_parser("sql", help="query every run's DuckDB (tables attached per run; all_<table> views)")
    s.add_argument("query")
    s.add_argument("--runs", default="runs")

    s = sub.add_parser("serve", help="OpenAI-compatible server over the transformers backend")
    s.add_argument("--model-dir", default=None)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        params = load_params(args.params, args.profile)
        COMMANDS[args.cmd](args, params)
    except (FileNotFoundError, ValueError) as e:
        print(f"whale: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
