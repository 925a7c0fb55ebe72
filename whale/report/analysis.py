"""The numbers of `whale report`, computed from the runs' rows (no plotting, no HTML)."""
from __future__ import annotations

import difflib
import shlex

from harnesses.archive import first_parents
from whale.report.compare import final_rewards
from whale.report.data import RunData
from whale.stats import difference, estimate
from whale.train.checkpoint import checkpoint_dir

RULES = """\
Rules used on this page:
  * final: a run's last test evaluation, with its 95 % bootstrap interval over test examples; the
    comparison block pairs conditions on the same examples (and seeds): `whale compare`. "null
    reward": what the final harness scored on the harness split under a policy that ignores its
    input (uniform choices or random tokens): a score near it was not earned by the model.
  * best: a run's highest test mean@k over its phase-boundary evaluations (a maximum over noisy
    evaluations: optimistic, and more so for runs evaluated more often); "rollouts at best" is
    the first point reaching it (cumulative weight + harness rollouts; test rollouts not counted).
  * at equal rollouts: B = the smallest final budget (weight + harness rollouts) among the
    domain's runs; each run's value is its best mean@k among points with cumulative rollouts <= B.
  * steps: a run's evaluations where the weights or the harness changed, each paired with the
    previous such point on the same test examples and seeds (what that phase bought, with its
    95 % interval), and the end against the start.
  * 2x2: base vs final weights x h0 vs final harness, where base/h0 are the start evaluation's
    weights and harness and final the last evaluation's; a cell is read from the run's evals, else
    from test-split rollouts of that (harness, weights) in any run of the domain (e.g. `whale eval`).
"""

CELLS = (("base", "h0"), ("base", "final"), ("final", "h0"), ("final", "final"))


def labels(runs: list[RunData]) -> dict[str, str]:
    """The condition names a domain's runs are shown under; the run id is added when two share one."""
    seen = {}
    for r in runs:
        seen[r.condition] = seen.get(r.condition, 0) + 1
    return {r.run_id: r.condition if seen[r.condition] == 1 else f"{r.condition} ({r.run_id})" for r in runs}


def run_summary(run: RunData) -> dict:
    ev = run.evals
    best = ev.loc[ev["mean_at_k"].idxmax()]  # the first maximum in evaluation order: the fewest rollouts
    final = ev.iloc[-1]
    return {"best_mean_at_k": float(best["mean_at_k"]), "rollouts_at_best": int(best["cumulative_rollouts"]),
            "final_mean_at_k": float(final["mean_at_k"]), "final_rollouts": int(final["cumulative_rollouts"]),
            "k": int(final["k"]), "points": len(ev)}


def condition_table(runs: list[RunData]) -> tuple[list[dict], int]:
    """One row per run (with its label) and the equal-rollout budget B of the domain."""
    names = labels(runs)
    summaries = {r.run_id: run_summary(r) for r in runs}
    budget = min(s["final_rollouts"] for s in summaries.values())
    rows = []
    for r in runs:
        within = r.evals[r.evals["cumulative_rollouts"] <= budget]
        rows.append({"label": names[r.run_id], "run_id": r.run_id, "condition": r.condition, **summaries[r.run_id],
                     "at_equal_rollouts": float(within["mean_at_k"].max()), "final_ci": _final_ci(r),
                     "final_null_reward": _null_reward(r)})
    return rows, budget


def _null_reward(run: RunData) -> float | None:
    """The final harness's harness-split reward under the null policy (None for a seed, never
    rolled so): what the harness earns without the model, the baseline its score is read against."""
    h = run.harnesses
    if h.empty or "null_reward" not in h.columns:
        return None
    rows = h[h["harness_id"] == run.evals.iloc[-1]["harness_id"]]["null_reward"].dropna()
    return float(rows.iloc[0]) if len(rows) else None


def _final_ci(run: RunData) -> list[float] | None:
    """The 95 % bootstrap interval (over test examples) of the run's final test mean@k."""
    try:
        e = estimate(final_rewards(run).to_numpy())
    except ValueError:
        return None
    return [e.lo, e.hi]


def endpoints(run: RunData) -> dict:
    """Base weights and h0 (the start evaluation's) and the final weights and harness (the last one's)."""
    ev = run.evals
    start = ev[ev["phase"] == "start"]
    first = start.iloc[0] if len(start) else ev.iloc[0]
    last = ev.iloc[-1]
    return {"base": first["weights_id"], "h0": first["harness_id"], "final_weights": last["weights_id"],
            "final_harness": last["harness_id"], "k": int(last["k"])}


def decomposition(run: RunData, pool: list[RunData]) -> dict:
    """The 2x2 of one run: each cell measured (value, source) or not (the command that would)."""
    ids = endpoints(run)
    cells = {}
    for w, h in CELLS:
        wid = ids["base"] if w == "base" else ids["final_weights"]
        hid = ids["h0"] if h == "h0" else ids["final_harness"]
        cells[(w, h)] = {"weights_id": wid, "harness_id": hid, **_measure(run, pool, hid, wid, ids["base"], ids["k"])}
    return {"run_id": run.run_id, "ids": ids, "cells": cells, "gains": _gains(cells)}


def _gains(cells: dict) -> dict:
    v = {key: c.get("value") for key, c in cells.items()}
    base = v[("base", "h0")]
    out = {}
    if base is not None:
        for name, key in (("weights", ("final", "h0")), ("harness", ("base", "final")), ("joint", ("final", "final"))):
            out[name] = None if v[key] is None else v[key] - base
    if out and None not in out.values():
        out["interaction"] = out["joint"] - out["weights"] - out["harness"]
    return out


def _measure(run: RunData, pool: list[RunData], hid: str, wid: str, base_wid: str, k: int) -> dict:
    ev = run.evals
    own = ev[(ev["harness_id"] == hid) & (ev["weights_id"] == wid)]
    if len(own):
        row = own.iloc[-1]
        return {"value": float(row["mean_at_k"]), "source": f"evals: cycle {row['cycle']}, {row['phase']}"}
    for other in [run] + [p for p in pool if p is not run]:
        m = other.measured
        hit = m[(m["harness_id"] == hid) & (m["weights_id"] == wid)]
        if len(hit):
            row = hit.iloc[0]
            return {"value": float(row["mean_at_k"]),
                    "source": f"test rollouts in run {other.run_id} ({row['n_examples']} examples, k={row['k']})"}
    return {"value": None, "command": eval_command(run, hid, wid, base_wid, k)}


def weights_location(run: RunData, wid: str, base_wid: str) -> str | None:
    """Where the weights with id ``wid`` live on disk, or None when no record says or the checkpoint
    a record names is gone (``storage.keep_checkpoints``, or removed by hand)."""
    if wid in run.checkpoints:
        return str(run.checkpoints[wid])
    if wid == base_wid:
        return str(run.params.get("model", {}).get("export_dir", "data/model"))
    ph = run.phases
    rows = ph[(ph["phase"] == "weight") & (ph["weights_id"] == wid)]
    if len(rows):  # the checkpoint written at the end of that weight phase
        ckpt = checkpoint_dir(run.dir / "checkpoints", int(rows.iloc[-1]["last_step"]) + 1)
        return str(ckpt) if ckpt.is_dir() else None
    return None


def eval_command(run: RunData, hid: str, wid: str, base_wid: str, k: int) -> str:
    model = weights_location(run, wid, base_wid)
    model_arg = shlex.quote(model) if model else f"<checkpoint with weights id {wid}: none on disk>"
    return (f"whale eval --domain {shlex.quote(run.domain)} --harness {shlex.quote(str(run.harness_path(hid)))} "
            f"--model {model_arg} -k {k}")


def final_harness(run: RunData) -> str | None:
    """The harness accepted by the run's last harness phase (None without a harness phase)."""
    ph = run.phases[run.phases["phase"] == "harness"]
    return None if ph.empty else str(ph.sort_values("cycle").iloc[-1]["harness_id"])


def lineage(run: RunData, newest: str) -> list[dict]:
    """``hid`` and its ancestors through first parents, newest first, with their harness-split scores."""
    table = {r["harness_id"]: r for r in run.harnesses.to_dict("records")}
    chain = []
    for hid in first_parents(newest, {h: r["parents"] for h, r in table.items()}):
        row = table.get(hid, {})
        parents = [str(p) for p in (row.get("parents") if row.get("parents") is not None else [])]
        sc = run.scores[run.scores["harness_id"] == hid]
        chain.append({
            "harness_id": hid, "known": bool(row), "parents": parents, "origin": row.get("origin") or "",
            "hypothesis": row.get("hypothesis") or "", "axis": row.get("axis") or "",
            "status": row.get("status") or "", "cycle": row.get("cycle"), "iteration": row.get("iteration"),
            "scores": [{"weights_id": s["weights_id"], "cycle": int(s["cycle"]), "iteration": int(s["iteration"]),
                        "mean_reward": float(s["mean_reward"]), "n": int(s["n"])} for s in sc.to_dict("records")],
        })
    return chain


def harness_diff(run: RunData, h0: str, final: str) -> str:
    """The unified diff of the final harness against h0, or why it cannot be shown."""
    paths = {h: run.harness_path(h) for h in (h0, final)}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        return "source not found: " + ", ".join(missing)
    old, new = (paths[h].read_text().splitlines(keepends=True) for h in (h0, final))
    diff = "".join(difflib.unified_diff(old, new, f"{h0}.py (h0)", f"{final}.py (final)"))
    return diff or "(identical sources)"


def proposer_summary(run: RunData) -> dict:
    p = run.proposer
    fallbacks = p["fallback_reason"].notna() & (p["fallback_reason"].fillna("") != "")
    return {"calls": len(p), "input_tokens": int(p["input_tokens"].fillna(0).sum()),
            "output_tokens": int(p["output_tokens"].fillna(0).sum()), "cost_usd": float(p["cost_usd"].fillna(0).sum()),
            "fallbacks": int(fallbacks.sum()), "proposers": ", ".join(sorted(set(p["proposer"].dropna())))}


def steps(run: RunData) -> list[dict]:
    """The run's evaluation points where the (harness, weights) pair changed, each with its 95 %
    interval and its paired difference to the previous such point, then the end against the start.
    A point whose pair is the previous one's (a grid point, a phase that kept everything) adds
    nothing and is left out."""
    points = []
    for row in run.evals.to_dict("records"):
        pair = (row["harness_id"], row["weights_id"])
        if points and points[-1]["pair"] == pair:
            continue
        scores = run.test_rewards(*pair)
        if scores.empty:
            continue
        points.append({"pair": pair, "row": row, "scores": scores})
    out = []
    for i, p in enumerate(points):
        row, prev = p["row"], points[i - 1] if i else None
        changed = "" if prev is None else "+".join(
            name for name, a, b in zip(("harness", "weights"), prev["pair"], p["pair"], strict=True) if a != b)
        out.append({"cycle": int(row["cycle"]), "phase": str(row["phase"]), "label": str(row["phase"]),
                    "cumulative_rollouts": int(row["cumulative_rollouts"]), "harness_id": p["pair"][0],
                    "weights_id": p["pair"][1], "changed": changed, "estimate": estimate(p["scores"].to_numpy()),
                    "delta": None if prev is None else _paired(p["scores"], prev["scores"])})
    if len(points) > 2:
        last, first = points[-1], points[0]
        end = int(run.evals.iloc[-1]["cumulative_rollouts"])
        out.append({**out[-1], "label": "end - start", "cumulative_rollouts": end, "changed": "", "estimate": None,
                    "delta": _paired(last["scores"], first["scores"])})
    return out


def _paired(a, b):
    """``a - b`` on the examples both were measured on (a test set is the same for a whole run)."""
    common = a.index.intersection(b.index)
    return difference(a[common].to_numpy(), b[common].to_numpy()) if len(common) else None
