"""`whale run`: run (or resume) one condition on one domain as the `whale` Prefect flow.

Everything is validated (params.yaml with the profile and ``--set``, the domain, the condition)
before the flow starts, so a typo costs neither a Prefect server start nor a run directory.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from domains import NAMES
from whale.cli.options import add_set, overrides
from whale.run.conditions import CONDITIONS
from whale.run.stop import raise_if_stopped


def add_arguments(p) -> None:
    p.add_argument("--domain", default="math_reasoning", choices=NAMES)
    p.add_argument("--condition", default="adaptive_whale", type=_conditions,
                   help=f"one of {', '.join(CONDITIONS)}, or several comma-separated (one run each)")
    p.add_argument("--run", default=None, help="run id (default <domain>-<condition>); rerun to resume")
    p.add_argument("--seeds", default=None, type=_seeds,
                   help="comma-separated run seeds, one run each, one after another (run ids get -s<seed>); "
                        "the data stay those of data_seed. Compare them with `whale compare`")
    p.add_argument("--no-report", action="store_true", help="do not write runs/report at the end")
    p.add_argument("--dry-run", action="store_true",
                   help="check the data, h0, model and settings and print the plan (rollouts per phase, "
                        "evaluations, trainer memory); runs nothing")
    add_set(p)


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds needs distinct non-negative integers, got {text!r}")
    return seeds


def _conditions(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONDITIONS]
    if not names or unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--condition takes distinct names among {', '.join(CONDITIONS)}, "
                                         f"got {text!r}")
    return names


def jobs(args) -> list[tuple[str, str | None, dict | None]]:
    """(condition, run id, overrides) of each run the command starts: every condition, then every seed."""
    if args.run and len(args.condition) > 1:
        raise ValueError("--run names one run: give one --condition with it")
    out = []
    for condition in args.condition:
        if args.seeds is None:
            out.append((condition, args.run, overrides(args)))
            continue
        base = args.run or f"{args.domain}-{condition}"
        out += [(condition, f"{base}-s{seed}", {**(overrides(args) or {}), "seed": seed}) for seed in args.seeds]
    return out


def run(args, settings) -> None:
    """One run, or one per seed: separate runs (each its own store and Prefect flow run), so each
    resumes on its own and a crash in one costs none of the others."""
    if args.dry_run:
        return _dry_run(args, settings)
    from flows.whale import whale

    for condition, run_id, override in jobs(args):
        raise_if_stopped()  # a stop asked for during one run ends the runs after it too
        result = whale(domain=args.domain, condition=condition, run_id=run_id, profile=args.profile,
                       overrides=override, params_path=args.params)
        print(json.dumps(result, indent=2, sort_keys=True))
    if not args.no_report:
        from whale.report import write_report

        print(f"report: {write_report(str(Path(result['run_dir']).parent))}")


def _dry_run(args, settings) -> None:
    from whale.cli.plan import make_plan

    problems = 0
    for condition in args.condition:
        run_dir = Path("runs") / args.run if args.run and len(args.condition) == 1 else None
        plan = make_plan(settings, args.domain, condition, run_dir)
        print(plan.render())
        problems += len(plan.problems)
    if problems:
        raise ValueError(f"dry run: {problems} problem(s) to fix before this run can start")
