"""The decision queries of a run at paper scale: a DuckDB store with a million synthetic rollouts.

    .venv/bin/python bench/store_queries.py [--rollouts 1000000] [--repeats 20]

The store is the real schema (``whale.store.Store``), filled in SQL with the shape of a paper-profile
run: RSFT steps of 256 prompts x 8 samples (a ``train_steps`` row each), harness phases of 15
iterations x 3 candidates x 256 examples (a ``scores`` row per candidate), and the rest test
evaluations. Timed through the code the flow calls, median and worst of ``--repeats``: the
adaptive weight rule, the adaptive harness rule, and a unit's rollout count (the budget ledger,
read after every harness unit). Payload columns (messages, token ids) are left small: the queries
never read them, and DuckDB stores columns apart.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN = "paper-run"
STEP_ROLLOUTS = 256 * 8
HARNESS_UNIT = 256  # one candidate's evaluation: 256 harness-split examples x 1 sample
ITERATIONS, CANDIDATES = 15, 3


def fill(store, n: int) -> dict:
    """Insert ``n`` rollouts shaped like a paper run; return the ids the timed calls ask about."""
    cycles = 5
    harness_rows = cycles * ITERATIONS * CANDIDATES * HARNESS_UNIT
    steps = max(1, (n - harness_rows) * 9 // 10 // STEP_ROLLOUTS)
    weight_rows = steps * STEP_ROLLOUTS
    eval_rows = n - weight_rows - harness_rows
    per_cycle = steps // cycles
    phase = ITERATIONS * CANDIDATES  # candidates per harness phase
    store.execute(f"""
        INSERT INTO rollouts (run_id, cycle, phase, step, split, example_id, sample_idx, harness_id, weights_id,
                              seed, reward, formatted, verdict, turns, tokens_in, tokens_out, stop_reason,
                              messages, token_ids, mask, latency_s, tool_calls)
        SELECT '{RUN}', 1 + (i // {STEP_ROLLOUTS}) // {per_cycle}, 'weight', i // {STEP_ROLLOUTS}, 'weight',
               'ex-' || ((i % {STEP_ROLLOUTS}) // 8), i % 8, 'h-' || (1 + (i // {STEP_ROLLOUTS}) // {per_cycle}),
               'w-' || (i // {STEP_ROLLOUTS}), i, (hash(i) % 3 = 0)::INT, true, '{{}}', 2, 900, 400, 'stop',
               '[]', [1, 2, 3], [0, 1, 1], 0.1, 1
        FROM range({weight_rows}) t(i)""")
    store.execute(f"""
        INSERT INTO rollouts (run_id, cycle, phase, step, split, example_id, sample_idx, harness_id, weights_id,
                              seed, reward, formatted, verdict, turns, tokens_in, tokens_out, stop_reason,
                              messages, token_ids, mask, latency_s, tool_calls)
        SELECT '{RUN}', 1 + u // {phase}, 'harness', 1 + (u // {CANDIDATES}) % {ITERATIONS},
               'harness', 'hx-' || (i % {HARNESS_UNIT}), 0, 'cand-' || u, 'w-c' || (1 + u // {phase}),
               i, (hash(i) % 4 = 0)::INT, true, '{{}}', 3, 1200, 500, 'stop', '[]', [1], [1], 0.1, 2
        FROM (SELECT i, i // {HARNESS_UNIT} AS u FROM range({harness_rows}) t(i))""")
    store.execute(f"""
        INSERT INTO rollouts (run_id, cycle, phase, step, split, example_id, sample_idx, harness_id, weights_id,
                              seed, reward, formatted, verdict, turns, tokens_in, tokens_out, stop_reason,
                              messages, token_ids, mask, latency_s, tool_calls)
        SELECT '{RUN}', 0, 'eval', i // 2048, 'test', 'tx-' || ((i % 2048) // 8), i % 8, 'h-eval', 'w-' || (i // 2048),
               i, (hash(i) % 5 = 0)::INT, true, '{{}}', 2, 900, 400, 'stop', '[]', [1], [1], 0.1, 1
        FROM range({max(eval_rows, 0)}) t(i)""")
    store.execute(f"""
        INSERT INTO train_steps SELECT '{RUN}', 1 + s // {per_cycle}, s, 'w-' || s, 'w-' || (s + 1),
               0.2 + 0.1 * sin(s / 7.0), 300, {STEP_ROLLOUTS}, 0.9, 400000, 60.0, false FROM range({steps}) t(s)""")
    store.execute(f"""
        INSERT INTO scores SELECT '{RUN}', 'cand-' || u, 'w-c' || (1 + u // {phase}), 'harness',
               1 + u // {phase}, 1 + (u // {CANDIDATES}) % {ITERATIONS}, {HARNESS_UNIT},
               0.3 + 0.01 * (u % 11), 0.9, 0.0, 0.0, 3.0
        FROM range({cycles * phase}) t(u)""")
    last = cycles * phase - 1
    return {"steps": steps, "per_cycle": per_cycle, "cycle": cycles, "weights": f"w-c{cycles}",
            "unit": (cycles, ITERATIONS, [f"cand-{last}"], f"w-c{cycles}")}


def timed(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm: the first call plans the query
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    from whale.run.schedule import HarnessRule, WeightRule
    from whale.store import Store

    with tempfile.TemporaryDirectory(prefix="whale-queries-") as tmp, Store(Path(tmp) / "rollouts.duckdb") as store:
        t0 = time.perf_counter()
        ids = fill(store, args.rollouts)
        n = store.count("rollouts")
        print(f"store: {n} rollouts, {store.count('train_steps')} train steps, {store.count('scores')} scores "
              f"(filled in {time.perf_counter() - t0:.1f} s)")
        first = (ids["cycle"] - 1) * ids["per_cycle"]
        weight = WeightRule(min_steps=2, window=6, patience=6)
        harness = HarnessRule(min_iters=5, patience=2, max_iters=99)
        cycle, step, hids, wid = ids["unit"]
        calls = {
            "adaptive weight rule (WeightRule.decide)":
                lambda: weight.decide(store, RUN, first, ids["steps"] - 1),
            "adaptive harness rule (HarnessRule.decide)":
                lambda: harness.decide(store, RUN, ids["cycle"], ids["weights"], ITERATIONS),
            "a unit's rollouts for the budget (Store.unit_rollouts)":
                lambda: store.unit_rollouts(RUN, cycle, "harness", step, hids, wid),
        }
        for name, call in calls.items():
            median, worst = timed(call, args.repeats)
            print(f"{name:58s} median {median:7.2f} ms  worst {worst:7.2f} ms  (target <= 50 ms)")


if __name__ == "__main__":
    main()
