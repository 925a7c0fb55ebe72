"""`whale eval`: rollouts of one harness on one split, stored in DuckDB and summarised."""
from __future__ import annotations

import json
import time
from pathlib import Path

from domains import get_domain
from harnesses.sandbox import Limits
from whale.backends import make_backend
from whale.backends.base import Sampling
from whale.engine import Engine, harness_id
from whale.files import write_json
from whale.metrics import summarize
from whale.model import EMBEDDED, export_model
from whale.store import Store
from whale.types import RolloutContext

RUNS = Path("runs")


def model_dir(params: dict) -> Path:
    """The exported checkpoint named by params.yaml, exported on first use."""
    out = Path(params["model"]["export_dir"])
    if not (out / "config.json").exists():
        source = params["model"]["source"]
        print(f"exporting {'SmolLM2-135M-Instruct (embedded GGUF)' if source == EMBEDDED else source} to {out}")
        export_model(source, out, params["model"]["dtype"])
    return out


def make_engine(params: dict, domain, model: str | Path) -> Engine:
    backend = make_backend(params, str(model))
    return Engine(backend, domain, Sampling.from_params(params), Limits.from_params(params))


def evaluate(params: dict, domain_name: str, harness_path: str | Path, split: str, k: int,
             run_id: str | None = None, model: str | Path | None = None) -> dict:
    domain = get_domain(domain_name, **params.get("verifier", {}).get(domain_name, {}))
    examples = domain.examples(split)
    source = Path(harness_path).read_text()
    engine = make_engine(params, domain, model or model_dir(params))
    hid = harness_id(source)
    run_id = run_id or f"eval-{domain_name}"
    t0 = time.perf_counter()
    rollouts = engine.run(source, examples, k, params["seed"], RolloutContext(run_id, 0, "eval", 0),
                          desc=f"eval {domain_name}/{split} {Path(harness_path).name}")
    wall = time.perf_counter() - t0
    run_dir = RUNS / run_id
    with Store(run_dir / "rollouts.duckdb") as store:
        store.insert("runs", [{"run_id": run_id, "domain": domain_name, "condition": "eval", "params": json.dumps(params)}])
        stored = store.insert_rollouts(rollouts)
    metrics = {
        **summarize(rollouts), "domain": domain_name, "split": split, "k": k, "harness_id": hid,
        "harness": str(harness_path), "weights_id": engine.backend.weights_id, "stored": stored,
        "wall_s": round(wall, 2), "rollouts_per_s": round(len(rollouts) / wall, 3),
    }
    write_json(run_dir / "metrics" / f"{split}-{hid}-{engine.backend.weights_id}.json", metrics)
    return metrics
