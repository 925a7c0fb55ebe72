"""What the OS jail costs: start-up, hook-call batches, and whole evaluations, jailed vs not.

    .venv/bin/python bench/sandbox.py [--model data/model] [--domain chess_puzzles] [--repeats 3]

Side by side in one run, the same harness worker started with ``sandbox.jail: bwrap`` and with
``none`` (the worker without bubblewrap):
- start-up: open a worker, load the harness, close it (median of 20);
- a batch of 32 ``start`` hook calls (median of 50);
- a harness-split evaluation of ``harnesses/examples/chess_choice.py`` on the real model (the
  engine starts one worker per evaluation), alternating modes, ``--repeats`` each;
- an RSFT step = sampling its rollouts (prompt_batch x k, jailed or not) + one SFT step on them;
  the SFT step (on the accepted rollouts only, as in a run) does not touch the jail, so it is timed
  once and added to both sides.
Prints one JSON line with the ratios (bwrap / none).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = (ROOT / "harnesses" / "examples" / "chess_choice.py").read_text()
OBS = {"side_to_move": "white", "fen": "8/8/8/8/8/8/8/K6k w - - 0 1", "legal_san": ["Ka2"], "legal_uci": ["a1a2"]}


def median_s(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def worker_costs(mode: str) -> dict:
    from harnesses.sandbox import HarnessSandbox, Limits

    limits = Limits(jail=mode)

    def start_close():
        HarnessSandbox(HARNESS, limits).close()

    with HarnessSandbox(HARNESS, limits) as sb:
        batch = median_s(lambda: sb.calls([(i, "start", OBS) for i in range(32)]), 50)
    return {"startup_s": median_s(start_close, 20), "batch32_s": batch}


def evaluation_s(engine, domain, mode: str, examples, k: int) -> float:
    engine.limits.jail = mode
    t = time.perf_counter()
    engine.run(HARNESS, examples, k, seed=0, progress=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "data" / "model"))
    ap.add_argument("--domain", default="chess_puzzles")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from domains import get_domain
    from harnesses.sandbox import Limits
    from whale.rollout.backends.base import Sampling
    from whale.rollout.backends.hf import TransformersBackend
    from whale.rollout.engine import Engine
    from whale.train.rsft import RSFTConfig, RSFTTrainer

    out = {"worker": {mode: worker_costs(mode) for mode in ("bwrap", "none")}}
    domain = get_domain(args.domain, str(ROOT / "data"))
    backend = TransformersBackend(args.model)
    engine = Engine(backend, domain, Sampling(1.0, 1.0, 20), Limits())
    harness_split, weight_split = domain.examples("harness"), domain.examples("weight")[:4]
    evals = {"bwrap": [], "none": []}
    steps = {"bwrap": [], "none": []}
    evaluation_s(engine, domain, "none", harness_split[:2], 1)  # warm-up: kernels, allocator
    for _ in range(args.repeats):
        for mode in ("bwrap", "none"):
            evals[mode].append(evaluation_s(engine, domain, mode, harness_split, 1))
            steps[mode].append(evaluation_s(engine, domain, mode, weight_split, 4))
    rollouts = engine.run(HARNESS, weight_split, 4, seed=0, progress=False)
    trainer = RSFTTrainer(args.model, RSFTConfig())
    t = time.perf_counter()
    trainer.step([r for r in rollouts if r.reward > 0.5])  # an RSFT step trains on accepted rollouts only
    sft_s = time.perf_counter() - t
    ev = {m: statistics.median(v) for m, v in evals.items()}
    st = {m: statistics.median(v) + sft_s for m, v in steps.items()}
    w = out["worker"]
    out.update({
        "evaluation_s": ev, "rsft_step_s": st, "sft_only_s": round(sft_s, 3),
        "ratio_startup": round(w["bwrap"]["startup_s"] / w["none"]["startup_s"], 2),
        "ratio_batch32": round(w["bwrap"]["batch32_s"] / w["none"]["batch32_s"], 2),
        "ratio_evaluation": round(ev["bwrap"] / ev["none"], 3),
        "ratio_rsft_step": round(st["bwrap"] / st["none"], 3),
    })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
