"""Two harness candidates evaluated one after another in the run's process against the same two at
once on a local Ray (two workers, prefect-ray), side by side in one run, on the embedded model.

The unit timed is what a harness iteration with M=2 dispatches: each candidate on every
harness-split example (its smoke examples first), one job per candidate. Ray is timed cold (its
first dispatch: worker processes start and load the weights) and warm (workers keep their
engine); Ray's own start is printed apart. Both ways must store the same rollouts: checked.

Usage: python bench/ray_harness.py [--examples 16] [--domain chess_puzzles]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CANDIDATES = {"chess_puzzles": ["harnesses/seeds/chess_puzzles.py", "harnesses/examples/chess_choice.py"],
              "math_reasoning": ["harnesses/seeds/math_reasoning.py", "harnesses/examples/math_program.py"]}


def timed(run, requests) -> tuple[float, list]:
    t0 = time.perf_counter()
    results = run.rollouts(requests)
    return time.perf_counter() - t0, [r.rollouts for r in results]


def same(a: list, b: list) -> bool:
    key = [[(r.example_id, r.sample_idx, r.token_ids, r.reward) for r in batch] for batch in a]
    return key == [[(r.example_id, r.sample_idx, r.token_ids, r.reward) for r in batch] for batch in b]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=16, help="harness-split examples per candidate")
    ap.add_argument("--domain", default="chess_puzzles", choices=sorted(CANDIDATES))
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")  # jobs run outside a flow here
    work = Path(tempfile.mkdtemp(prefix="whale-bench-ray-"))
    os.chdir(work)
    from whale.testing import make_project

    overrides = make_project(work, ROOT / "data" / "model", (args.domain,))
    overrides["data"][args.domain] = {"weight": 4, "harness": args.examples, "test": 2}
    from domains import get_domain

    get_domain(args.domain, str(work / "data")).prepare(overrides["data"][args.domain], 0)
    from tasks.parallel import RayDispatch
    from whale.run.conditions import get_condition
    from whale.run.context import Request, Run
    from whale.run.settings import load_settings

    overrides["parallel"] = {"engine": "ray", "workers": 2}
    overrides["harness_search"].pop("h0")
    settings = load_settings("params.yaml", None, overrides, args.domain)
    run = Run(settings, args.domain, get_condition("harness_only"), "bench")
    hids = [run.archive.add((ROOT / path).read_text(), origin="seed") for path in CANDIDATES[args.domain]]
    examples = run.domain.examples("harness")

    first = settings.harness_search.smoke_examples
    chunks = [examples[:first], examples[first:]]

    def requests(step: int) -> list:
        """As the flow asks for candidates: smoke examples first, one job per candidate."""
        return [Request([(run.key(1, "harness", step, h, c, 1, 7), c) for c in chunks], f"candidate {h}", smoke=True)
                for h in hids]

    try:
        local_s, local = timed(run, requests(1))
        t0 = time.perf_counter()
        run.dispatch = RayDispatch(settings.parallel)
        start_s = time.perf_counter() - t0
        cold_s, cold = timed(run, requests(2))
        warm_s, warm = timed(run, requests(3))
    finally:
        run.close()
    n = 2 * len(examples)
    print(f"{args.domain}: 2 candidates x {len(examples)} harness-split examples ({n} rollouts), embedded model, "
          f"{os.cpu_count()} CPUs")
    print(f"  sequential, in the run's process   {local_s:7.1f} s")
    print(f"  Ray start (local, 2 CPUs)           {start_s:7.1f} s  (once per run)")
    print(f"  Ray, 2 workers, cold                {cold_s:7.1f} s  ratio sequential/Ray {local_s / cold_s:.2f}")
    print(f"  Ray, 2 workers, warm                {warm_s:7.1f} s  ratio sequential/Ray {local_s / warm_s:.2f}")
    print(f"  same rollouts (tokens, rewards): cold {same(local, cold)}, warm {same(local, warm)}")


if __name__ == "__main__":
    main()
