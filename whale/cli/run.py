"""`whale run`: run (or resume) one condition on one domain as the `whale` Prefect flow.

Everything is validated (params.yaml with the profile and ``--set``, the domain, the condition)
before the flow starts, so a typo costs neither a Prefect server start nor a run directory.
"""
from __future__ import annotations

import json
from pathlib import Path

from domains import NAMES
from whale.run.conditions import CONDITIONS


def add_arguments(p) -> None:
    p.add_argument("--domain", default="math_reasoning", choices=NAMES)
    p.add_argument("--condition", default="adaptive_whale", choices=list(CONDITIONS))
    p.add_argument("--run", default=None, help="run id (default <domain>-<condition>); rerun to resume")
    p.add_argument("--no-report", action="store_true", help="do not write runs/report at the end")
    p.add_argument("--set", default=None, help="JSON overrides of params.yaml, e.g. '{\"schedule\": {\"E\": 0.2}}'")


def overrides(args) -> dict | None:
    if not args.set:
        return None
    try:
        return json.loads(args.set)
    except json.JSONDecodeError as e:
        raise ValueError(f"--set is not valid JSON: {e}") from None


def run(args, settings) -> None:
    from flows.whale import whale

    result = whale(domain=args.domain, condition=args.condition, run_id=args.run, profile=args.profile,
                   overrides=overrides(args), params_path=args.params)
    print(json.dumps(result, indent=2, sort_keys=True))
    if not args.no_report:
        from whale.report import write_report

        print(f"report: {write_report(str(Path(result['run_dir']).parent))}")
