"""`whale run`: run (or resume) one condition on one domain as the `whale` Prefect flow."""
from __future__ import annotations

import json
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("--domain", default="math_reasoning")
    p.add_argument("--condition", default="adaptive_whale",
                   choices=["weight_only", "harness_only", "whale", "adaptive_whale", "stagewise", "prompt_only"])
    p.add_argument("--run", default=None, help="run id (default <domain>-<condition>); rerun to resume")
    p.add_argument("--no-report", action="store_true", help="do not write runs/report at the end")
    p.add_argument("--set", default=None, help="JSON overrides of params.yaml, e.g. '{\"schedule\": {\"E\": 0.2}}'")


def run(args, params) -> None:
    from flows.whale import whale

    overrides = json.loads(args.set) if args.set else None
    result = whale(domain=args.domain, condition=args.condition, run_id=args.run, profile=args.profile,
                   overrides=overrides, params_path=args.params)
    print(json.dumps(result, indent=2, sort_keys=True))
    if not args.no_report:
        from whale.report import write_report

        print(f"report: {write_report(str(Path(result['run_dir']).parent))}")
