"""An ablation of a found harness's edits under fixed weights, side by side in one run.

The harness a run's search accepted is rebuilt from the seed by the offline library's primitives
its lineage names (``whale harness lineage``). Each variant drops one of those edits; the seed
drops them all; harness files given with ``--harness`` (a hand-written example) are measured
beside them. Every variant is rolled on the harness split and on the test split under the same
weights (``--model``: the run's final checkpoint, or the base model) with the same seeds, and
compared with the full found harness by paired bootstrap intervals over examples and samples.
This is reporting: no default, primitive or profile is chosen from its test numbers.

    .venv/bin/python bench/ablation.py --domain chess_puzzles --found legal_choices+annotated_moves \\
        --model runs/chess_puzzles-adaptive_whale/checkpoints/<weights id> -k 4 --json runs/bench/ablation.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def variants(domain: str, names: list[str], files: list[Path]) -> dict[str, str]:
    """The found harness, it without each edit, the seed, and any given files, by label."""
    from bench.reward_guards import rebuild

    out = {f"found: seed + {'+'.join(names)}": rebuild(domain, names)}
    if len(names) > 1:
        out.update({f"without {n}": rebuild(domain, [m for m in names if m != n]) for n in names})
    out["seed h0"] = rebuild(domain, [])
    out.update({f"file: {p.name}": p.read_text() for p in files})
    return out


def matrix(rollouts, example_ids: list[str], k: int) -> list[list[float]]:
    """Rewards as (samples x examples), in the examples' order."""
    reward = {(r.example_id, r.sample_idx): r.reward for r in rollouts}
    return [[reward[(e, s)] for e in example_ids] for s in range(k)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domain", required=True)
    p.add_argument("--found", required=True, metavar="PRIMITIVE+PRIMITIVE",
                   help="the primitives the found harness's lineage applied to the seed, in order")
    p.add_argument("--harness", action="append", default=[], type=Path, help="another harness file to measure")
    p.add_argument("--model", default=None, help="weights directory (default model.export_dir)")
    p.add_argument("-k", type=int, default=4, help="samples per example")
    p.add_argument("--splits", default="harness,test")
    p.add_argument("--json", type=Path, help="write the rows here as they come")
    args = p.parse_args(argv)
    from bench.vllm_engines import cpu_flags, emit
    from whale.run.context import domain_for, make_engine, model_dir
    from whale.run.settings import load_settings
    from whale.stats import difference, estimate

    settings = load_settings(ROOT / "params.yaml", domain=args.domain)
    domain = domain_for(settings, args.domain, ROOT / "data")
    engine = make_engine(settings, domain, args.model or model_dir(settings), log_dir="/tmp/whale-bench-ablation")
    sources = variants(args.domain, args.found.split("+"), args.harness)
    full = next(iter(sources))
    rows: list[dict] = []
    try:
        for split in args.splits.split(","):
            examples = domain.examples(split)
            ids = [e.id for e in examples]
            scores: dict[str, list[list[float]]] = {}
            for label, source in sources.items():
                t = time.perf_counter()
                rollouts = engine.run(source, examples, args.k, settings.seed, progress=False)
                scores[label] = matrix(rollouts, ids, args.k)
                est = estimate(scores[label])
                row = {"domain": args.domain, "split": split, "harness": label, "examples": len(ids), "k": args.k,
                       "mean": round(est.mean, 4), "interval": [round(est.lo, 4), round(est.hi, 4)],
                       "wall_s": round(time.perf_counter() - t, 1), "model": str(args.model or "base"),
                       "backend": settings.backend.kind, "cpu_flags": cpu_flags()}
                if label != full:
                    d = difference(scores[label], scores[full])
                    row["minus_found"] = [round(d.mean, 4), round(d.lo, 4), round(d.hi, 4)]
                emit(row, rows, args.json)
    finally:
        if hasattr(engine.backend, "close"):
            engine.backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
