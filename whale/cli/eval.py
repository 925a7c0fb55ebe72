"""`whale eval`: rollouts of one harness on one split, stored in DuckDB and summarised."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from whale.cli.options import add_set
from whale.files import write_json
from whale.ids import harness_id
from whale.provenance import code_version
from whale.rollout.metrics import per_example_means, summarize
from whale.run.context import domain_for, h0_path, make_engine, model_dir
from whale.run.settings import Settings
from whale.stats import estimate
from whale.store import Store, store_path
from whale.types import RolloutContext

RUNS = Path("runs")


def evaluate(settings: Settings, domain_name: str, harness_path: str | Path | None, split: str, k: int,
             run_id: str | None = None, model: str | Path | None = None, data_dir: str | Path = "data") -> dict:
    """``harness_path`` None: the domain's h0 (``harness_search.h0``, else its seed harness)."""
    harness_path = harness_path or h0_path(settings, domain_name)
    domain = domain_for(settings, domain_name, data_dir)
    examples = domain.examples(split)
    source = Path(harness_path).read_text()
    engine = make_engine(settings, domain, model or model_dir(settings))
    hid = harness_id(source)
    run_id = run_id or f"eval-{domain_name}"
    t0 = time.perf_counter()
    try:
        rollouts = engine.run(source, examples, k, settings.seed, RolloutContext(run_id, 0, "eval", 0),
                              desc=f"eval {domain_name}/{split} {Path(harness_path).name}")
    finally:
        if hasattr(engine.backend, "close"):  # a vLLM server this command started stops here
            engine.backend.close()
    wall = time.perf_counter() - t0
    run_dir, code = RUNS / run_id, code_version()
    with Store(store_path(run_dir)) as store:
        store.insert("runs", [{"run_id": run_id, "domain": domain_name, "condition": "eval",
                               "params": settings.as_json()}])
        store.record_start(run_id, code)
        stored = store.insert_rollouts(rollouts)
    means = per_example_means(rollouts)
    interval = estimate(means) if means else None
    metrics = {
        **summarize(rollouts), "domain": domain_name,
        "mean_at_k_interval": [round(interval.lo, 4), round(interval.hi, 4)] if interval else None,
        "split": split, "k": k, "harness_id": hid,
        "harness": str(harness_path), "code": code, "weights_id": engine.backend.weights_id, "stored": stored,
        "wall_s": round(wall, 2), "rollouts_per_s": round(len(rollouts) / wall, 3),
    }
    write_json(run_dir / "metrics" / f"{split}-{hid}-{engine.backend.weights_id}.json", metrics)
    return metrics


def add_arguments(p) -> None:
    p.add_argument("--domain", required=True)
    p.add_argument("--harness", default=None,
                   help="path of a harness .py file (default: the domain's h0, harness_search.h0 or its seed)")
    p.add_argument("--data-dir", default="data", help="where the domain's splits are (as `whale prepare --data-dir`)")
    p.add_argument("--split", default="test", choices=["weight", "harness", "test"])
    p.add_argument("-k", type=int, default=None, help="samples per example (default eval.k)")
    p.add_argument("--run", default=None, help="run id (default eval-<domain>)")
    p.add_argument("--model", default=None, help="checkpoint directory (default model.export_dir)")
    add_set(p)  # e.g. another sampling temperature than the run's


def run(args, settings) -> None:
    m = evaluate(settings, args.domain, args.harness, args.split, args.k or settings.eval.k, args.run, args.model,
                 args.data_dir)
    lo, hi = m["mean_at_k_interval"] or (0.0, 0.0)
    print(f"{m['domain']}/{m['split']} {Path(m['harness']).name}: mean@{m['k']} {m['mean_at_k']:.3f} "
          f"[{lo:.3f}, {hi:.3f}] (95 % bootstrap interval over {m['n_examples']} examples)", file=sys.stderr)
    print(json.dumps(m, indent=2, sort_keys=True))
