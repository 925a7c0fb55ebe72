"""How much the uniform null policy's reward on the harness split moves with its draw.

The null-policy guard refuses a candidate whose null reward is above h0's by ``null_margin``
(whale/run/guard.py). That mean is itself an estimate from ``null_samples`` draws per example; this
bench measures its spread over independent draws at several sample counts, for harnesses rebuilt
from the seed by the offline library's primitives (``--found``, as bench/ablation.py does) or read
from files, with the time one estimate takes (no model compute: the uniform policy only). It
reads the harness split only.

    .venv/bin/python bench/null_noise.py --domain search_qa \\
        --found search_first+answer_spans+answer_prefix+query_from_question --samples 8,32,64 --draws 6
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domain", required=True)
    p.add_argument("--found", action="append", default=[], metavar="PRIMITIVE+PRIMITIVE",
                   help="a harness rebuilt from the seed by these primitives, in order (repeatable; '' = the seed)")
    p.add_argument("--harness", action="append", default=[], type=Path, help="a harness file (repeatable)")
    p.add_argument("--samples", default="8,32,64", help="null samples per example to compare")
    p.add_argument("--draws", type=int, default=6, help="independent draws per sample count")
    p.add_argument("--json", type=Path, help="write the rows here as they come")
    args = p.parse_args(argv)
    from transformers import AutoTokenizer

    from bench.reward_guards import rebuild
    from bench.vllm_engines import cpu_flags, emit
    from whale.run.context import domain_for
    from whale.run.guard import NULL_SEED, null_policy_reward
    from whale.run.settings import load_settings

    base = load_settings(ROOT / "params.yaml", domain=args.domain)
    domain = domain_for(base, args.domain, ROOT / "data")
    tokenizer = AutoTokenizer.from_pretrained(base.model.export_dir)
    harnesses = {f"seed + {f}" if f else "seed h0": rebuild(args.domain, [n for n in f.split("+") if n])
                 for f in args.found}
    harnesses.update({f"file: {h.name}": h.read_text() for h in args.harness})
    if not harnesses:
        p.error("give --found or --harness")
    rows: list[dict] = []
    for label, source in harnesses.items():
        for samples in [int(s) for s in args.samples.split(",")]:
            settings = base.model_copy(update={"harness_search": base.harness_search.model_copy(
                update={"null_samples": samples, "null_refine_samples": 0})})
            values, t = [], time.perf_counter()
            for draw in range(args.draws):
                values.append(null_policy_reward(settings, domain, source, tokenizer, seed=NULL_SEED + 1000 * draw))
            emit({"domain": args.domain, "harness": label, "null_samples": samples,
                  "examples": len(domain.examples("harness")), "draws": [round(v, 4) for v in values],
                  "mean": round(statistics.fmean(values), 4), "sd": round(statistics.pstdev(values), 4),
                  "min": round(min(values), 4), "max": round(max(values), 4),
                  "seconds_per_estimate": round((time.perf_counter() - t) / args.draws, 2),
                  "null_margin": base.harness_search.null_margin, "cpu": cpu_flags()}, rows, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
