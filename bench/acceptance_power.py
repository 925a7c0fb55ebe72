"""How often the harness phase's acceptance rule takes a better challenger, by harness-split size.

A Monte Carlo of one harness phase as flows/phases.py runs it, with scripted rewards in place of
rollouts: the incoming harness and ``--candidates`` challengers are each scored with one sample
per harness-split example; the top challenger by that score and the incoming harness get
``recheck_samples`` more samples each; ``whale.run.acceptance.accept`` (the rule of params.yaml,
``harness_search.accept``) decides on the per-example means of all their samples (``samples: all``) or of
the re-check's alone (``samples: recheck``), as ``accept_harness`` reads them from the store.

Scripted rewards: example e has a success probability p_e drawn from a Beta with mean ``--base``
(examples differ in difficulty, as they do); the better challenger adds ``--delta`` to every p_e
(clipped to [0, 1]), the others equal the incoming harness. A sample is ``u < p`` with u uniform.
With common random numbers (``coupling`` 1) every harness sees the same u at the same (example,
seed), as the phase's shared seeds give a model whose harness shifts its odds; with coupling 0
the draws are independent, the worst case. A real model sits in between.

Reported: power (the better challenger accepted) at ``--delta`` and the false-accept rate (any
challenger accepted) when all are equal, per size and coupling, with the rollouts a phase spends.

    .venv/bin/python bench/acceptance_power.py --json runs/bench/acceptance_power.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def phase(rng, n: int, candidates: int, recheck: int, delta: float, coupling: float, base: float,
          spread: float, rule) -> str:
    """One simulated phase: the accepted harness ("incoming", "better" or "equal<i>")."""
    from whale.run.acceptance import accept

    a = base * spread
    p = rng.beta(a, spread - a, size=n)
    names = ["incoming", "better" if delta else "equal0"] + [f"equal{i}" for i in range(1, candidates)]
    probs = {h: np.clip(p + (delta if h == "better" else 0.0), 0, 1) for h in names}
    shared = rng.random((1 + recheck, n))

    def draws(h: str, rows: slice) -> np.ndarray:
        own = rng.random(shared[rows].shape)
        u = np.where(rng.random(shared[rows].shape) < coupling, shared[rows], own)
        return (u < probs[h]).astype(float)

    first = {h: draws(h, slice(0, 1)) for h in names}
    top = max(names[1:], key=lambda h: (first[h].mean(), rng.random()))
    per_example = {}
    for h in ("incoming", top):
        samples = first[h]
        if recheck:
            fresh = draws(h, slice(1, 1 + recheck))
            samples = fresh if rule.samples == "recheck" else np.vstack([first[h], fresh])
        per_example[h] = {f"e{i}": float(v) for i, v in enumerate(samples.mean(axis=0))}
    return accept("incoming", per_example, rule).harness_id


def main() -> None:
    from whale.run.acceptance import AcceptRule
    from whale.run.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,32,48,64,96,128")
    ap.add_argument("--recheck", default="", help="recheck_samples values (default: params.yaml's)")
    ap.add_argument("--candidates", type=int, default=0, help="challengers per phase (default: (I-1) x M)")
    ap.add_argument("--delta", type=float, default=0.10)
    ap.add_argument("--base", type=float, default=0.3, help="mean success of the incoming harness")
    ap.add_argument("--spread", type=float, default=2.0, help="Beta concentration of per-example success")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--samples", choices=["all", "recheck"], help="what the rule reads (default: params.yaml)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    s = load_settings(ROOT / "params.yaml", None, {}, None)
    h = s.harness_search
    rule = AcceptRule(**{**h.accept.model_dump(), **({"samples": args.samples} if args.samples else {})})
    candidates = args.candidates or (s.schedule.I - 1) * h.M
    rechecks = [int(x) for x in args.recheck.split(",")] if args.recheck else [h.recheck_samples]
    print(f"rule: {rule.describe()} at level {rule.level}; {candidates} challengers per phase; "
          f"delta {args.delta:+.2f} over a mean of {args.base}; {args.trials} phases per cell")
    print(f"{'n':>4} {'recheck':>7} {'coupling':>8} {'power':>6} {'false':>6} {'rollouts':>8}")
    rows = []
    for recheck in rechecks:
        for n in [int(x) for x in args.sizes.split(",")]:
            for coupling in (1.0, 0.0):
                rng = np.random.default_rng(0)
                won = sum(phase(rng, n, candidates, recheck, args.delta, coupling, args.base, args.spread, rule)
                          == "better" for _ in range(args.trials))
                false = sum(phase(rng, n, candidates, recheck, 0.0, coupling, args.base, args.spread, rule)
                            != "incoming" for _ in range(args.trials))
                spent = n * (1 + candidates) + 2 * n * recheck
                row = {"n": n, "recheck_samples": recheck, "coupling": coupling, "power": won / args.trials,
                       "false_accept": false / args.trials, "rollouts_per_phase": spent}
                rows.append(row)
                print(f"{n:>4} {recheck:>7} {coupling:>8.0f} {row['power']:>6.2f} {row['false_accept']:>6.2f} "
                      f"{spent:>8}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rule": rule.describe(),
                                         "candidates": candidates, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
