"""`whale report`: the results of every run under runs/, per domain, as files that need no server.

Writes into ``out_dir``: ``index.html`` (self-contained: inline CSS, the figures embedded as PNG
data URIs, no script, nothing fetched, so it renders offline, unlike `dvc plots show`), the PNGs
themselves under ``<domain>/``, ``metrics.json`` (per domain and condition: best, rollouts at best,
at equal rollouts, final) and ``curves.csv`` (every test evaluation point) for `dvc metrics` /
`dvc plots`, and ``steps.csv`` (what each phase bought: paired differences with their intervals).
Run databases are opened read-only; one that is locked by a running writer is skipped and named
on the page.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from whale.files import write_atomic
from whale.provenance import short_code
from whale.report import analysis as ra
from whale.report import plots as rp
from whale.report.compare import compare
from whale.report.compare import render as render_comparison
from whale.report.data import RunData, load_runs
from whale.report.html import render

CURVE_COLUMNS = ("domain", "condition", "run_id", "cycle", "phase", "cumulative_rollouts", "mean_at_k")
STEP_COLUMNS = ("domain", "condition", "run_id", "cycle", "point", "cumulative_rollouts", "changed", "mean_at_k",
                "ci95_lo", "ci95_hi", "delta", "delta_lo", "delta_hi")


def write_report(runs_dir: str | Path = "runs", out_dir: str | Path = "runs/report",
                 run_ids: list[str] | None = None) -> Path:
    """Build the report from ``runs_dir/*/rollouts.duckdb`` (or only ``run_ids``); return the HTML path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, warnings = load_runs(runs_dir, run_ids)
    by_domain: dict[str, list[RunData]] = {}
    for r in runs:
        by_domain.setdefault(r.domain, []).append(r)
    domains = [domain_section(name, by_domain[name], out_dir) for name in sorted(by_domain)]
    domains = [d for d in domains if d is not None]
    write_atomic(out_dir / "metrics.json", json.dumps(metrics(domains), indent=2, sort_keys=True) + "\n")
    write_atomic(out_dir / "curves.csv", curves_csv(domains))
    write_atomic(out_dir / "steps.csv", steps_csv(domains))
    html = out_dir / "index.html"
    write_atomic(html, render(domains, warnings, [r.run_id for r in runs]))
    return html


def domain_section(domain: str, pool: list[RunData], out_dir: Path) -> dict | None:
    """Everything the page shows for one domain; the PNGs are written as a side effect."""
    runs = [r for r in pool if not r.evals.empty]
    unevaluated = [r.run_id for r in pool if r.evals.empty]
    if not runs:
        return {"domain": domain, "anchor": _safe(domain), "empty": True, "unevaluated": unevaluated} \
            if unevaluated else None
    names = ra.labels(runs)
    rows, budget = ra.condition_table(runs)
    folder = out_dir / _safe(domain)
    series = [{"label": names[r.run_id], "condition": r.condition, "evals": r.evals} for r in runs]
    decomposition = [{"label": names[r.run_id], **ra.decomposition(r, pool)} for r in runs]
    rollouts = [{"label": names[r.run_id], "run_id": r.run_id, "by_phase": r.rollouts_by_phase,
                 "code": ", ".join(short_code(c) for c in r.codes) or "not recorded"} for r in runs]
    proposer = [{"label": names[r.run_id], "run_id": r.run_id, **ra.proposer_summary(r)} for r in runs]
    steps = [{"label": names[r.run_id], "run_id": r.run_id, "condition": r.condition, "k": int(r.evals.iloc[-1]["k"]),
              "points": ra.steps(r)} for r in runs]
    return {
        "domain": domain, "anchor": _safe(domain), "empty": False, "budget": budget, "conditions": rows,
        "series": series, "steps": steps, "decomposition": decomposition, "rollouts": rollouts, "proposer": proposer,
        "lineages": _lineages(domain, runs, names, folder), "unevaluated": unevaluated,
        "comparison": _comparison(runs, domain),
        "images": {
            "curve": rp.plot_curves(domain, series, budget, folder / "curves.png"),
            "decomposition": rp.plot_decomposition(domain, decomposition, folder / "decomposition.png"),
            "rollouts": rp.plot_rollouts(domain, rollouts, folder / "rollouts_by_phase.png"),
            "proposer": rp.plot_proposer(domain, proposer, folder / "proposer_cost.png"),
        },
    }


def _comparison(runs: list[RunData], domain: str) -> str:
    try:
        return render_comparison(compare(runs, domain))
    except ValueError as e:
        return f"no paired comparison: {e}"


def _lineages(domain: str, runs: list[RunData], names: dict[str, str], folder: Path) -> list[dict]:
    out = []
    for r in runs:
        final = ra.final_harness(r)
        if final is None:
            continue
        h0 = ra.endpoints(r)["h0"]
        nodes = ra.lineage(r, final)
        image = rp.plot_lineage(f"{domain} / {names[r.run_id]}: lineage of the final harness {final}", nodes,
                                folder / f"lineage_{_safe(r.run_id)}.png")
        out.append({"label": names[r.run_id], "run_id": r.run_id, "final": final, "h0": h0, "nodes": nodes,
                    "diff": ra.harness_diff(r, h0, final), "image": image})
    return out


def metrics(domains: list[dict]) -> dict:
    """domain -> condition label -> the headline numbers (what `dvc metrics show` lists)."""
    out = {}
    for d in domains:
        if d["empty"]:
            continue
        out[d["domain"]] = {r["label"]: {
            "run_id": r["run_id"], "k": r["k"], "best_mean_at_k": r["best_mean_at_k"],
            "rollouts_at_best": r["rollouts_at_best"], "at_equal_rollouts": r["at_equal_rollouts"],
            "equal_rollout_budget": d["budget"], "final_mean_at_k": r["final_mean_at_k"],
            "final_rollouts": r["final_rollouts"], "final_ci95": r["final_ci"],
            "final_null_reward": r["final_null_reward"]} for r in d["conditions"]}
    return out


def curves_csv(domains: list[dict]) -> str:
    return _csv(CURVE_COLUMNS, (
        [d["domain"], series["condition"], row["run_id"], row["cycle"], row["phase"], int(row["cumulative_rollouts"]),
         row["mean_at_k"]]
        for d in domains for series in d.get("series", []) for row in series["evals"].to_dict("records")))


def steps_csv(domains: list[dict]) -> str:
    return _csv(STEP_COLUMNS, (
        [d["domain"], run["condition"], run["run_id"], p["cycle"], p["label"], p["cumulative_rollouts"], p["changed"],
         *_interval(p["estimate"]), *_interval(p["delta"])]
        for d in domains for run in d.get("steps", []) for p in run["points"]))


def _csv(columns: tuple[str, ...], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    return buf.getvalue()


def _interval(e) -> list:
    return ["", "", ""] if e is None else [round(e.mean, 4), round(e.lo, 4), round(e.hi, 4)]


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)

