"""The PNG figures of `whale report` (matplotlib, Agg backend: no display, no browser library)."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)

from whale.files import write_atomic  # noqa: E402

CONDITION_COLORS = {"weight_only": "#1f77b4", "harness_only": "#ff7f0e", "whale": "#2ca02c",
                    "adaptive_whale": "#d62728", "stagewise": "#9467bd", "prompt_only": "#8c564b"}
EXTRA_COLORS = ("#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PHASE_MARKERS = {"start": "o", "weight": "s", "harness": "^"}
PHASE_TICKS = {"weight": "-", "harness": ":"}


def color(condition: str, index: int) -> str:
    return CONDITION_COLORS.get(condition, EXTRA_COLORS[index % len(EXTRA_COLORS)])


def save(fig, path: Path) -> Path:
    """Write the figure atomically (tmp + rename) and free it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return write_atomic(path, buf.getvalue())


def plot_curves(domain: str, series: list[dict], budget: int, path: Path) -> Path:
    """Test mean@k against cumulative rollouts; marker shape and a tick on the x axis mark each
    phase boundary (solid tick: weight phase ended, dotted: harness phase ended)."""
    fig, ax = plt.subplots(figsize=(9, 5))
    for i, s in enumerate(series):
        c = color(s["condition"], i)
        ev = s["evals"]
        ax.plot(ev["cumulative_rollouts"], ev["mean_at_k"], color=c, lw=1.8, label=s["label"])
        for phase, marker in PHASE_MARKERS.items():
            pts = ev[ev["phase"] == phase]
            ax.scatter(pts["cumulative_rollouts"], pts["mean_at_k"], color=c, marker=marker, s=42, zorder=3,
                       edgecolors="black", linewidths=0.5)
            if phase in PHASE_TICKS:
                for x in pts["cumulative_rollouts"]:
                    ax.plot([x, x], [0, 0.05], color=c, ls=PHASE_TICKS[phase], lw=2,
                            transform=ax.get_xaxis_transform())
    ax.axvline(budget, color="grey", ls="--", lw=1)
    ax.text(budget, 1.0, " equal-rollout budget", transform=ax.get_xaxis_transform(), va="top", fontsize=8,
            color="grey")
    for phase, marker in PHASE_MARKERS.items():
        ax.scatter([], [], marker=marker, color="white", edgecolors="black", label=f"after {phase}" if phase != "start"
                   else "start (base weights, h0)")
    k = series[0]["evals"]["k"].iloc[-1] if series else "k"
    ax.set(xlabel="cumulative rollouts (weight + harness phases)", ylabel=f"test mean@{k}",
           title=f"{domain}: test accuracy against rollouts spent")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save(fig, path)


def plot_decomposition(domain: str, rows: list[dict], path: Path) -> Path:
    """Grouped bars: for each run, the four cells of base/final weights x h0/final harness."""
    from whale.report.analysis import CELLS

    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.2
    shades = ("#c6dbef", "#6baed6", "#fdae6b", "#e6550d")
    for j, key in enumerate(CELLS):
        xs, ys = [], []
        for i, r in enumerate(rows):
            v = r["cells"][key].get("value")
            if v is not None:
                xs.append(i + (j - 1.5) * width)
                ys.append(v)
        ax.bar(xs, ys, width, color=shades[j], edgecolor="black", lw=0.5, label=f"{key[0]} weights x {key[1]} harness")
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=15, fontsize=8)
    ax.set(ylabel="test mean@k", title=f"{domain}: weights x harness decomposition (missing bar = not measured)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_rollouts(domain: str, rows: list[dict], path: Path) -> Path:
    """Stacked bars of each run's rollouts by phase (weight, harness, eval)."""
    fig, ax = plt.subplots(figsize=(9, 4))
    bottom = [0] * len(rows)
    for phase, c in (("weight", "#1f77b4"), ("harness", "#ff7f0e"), ("eval", "#7f7f7f")):
        vals = [r["by_phase"].get(phase, 0) for r in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, color=c, label=phase)
        bottom = [b + v for b, v in zip(bottom, vals, strict=False)]
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=15, fontsize=8)
    ax.set(ylabel="rollouts", title=f"{domain}: rollouts by phase")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_proposer(domain: str, rows: list[dict], path: Path) -> Path:
    """Proposer tokens per run (input and output stacked), with the cost written above each bar."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ins = [r["input_tokens"] for r in rows]
    outs = [r["output_tokens"] for r in rows]
    ax.bar(range(len(rows)), ins, color="#9ecae1", label="input tokens")
    ax.bar(range(len(rows)), outs, bottom=ins, color="#3182bd", label="output tokens")
    for i, r in enumerate(rows):
        ax.text(i, ins[i] + outs[i], f"${r['cost_usd']:.2f}, {r['calls']} calls", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=15, fontsize=8)
    ax.set(ylabel="tokens", title=f"{domain}: harness proposer cost")
    ax.margins(y=0.15)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_lineage(title: str, nodes: list[dict], path: Path) -> Path:
    """Harness-split score of each harness on the final harness's lineage (seed left, final right),
    one colour per weights id it was scored under."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    chain = list(reversed(nodes))
    weights = sorted({s["weights_id"] for n in chain for s in n["scores"]})
    cmap = plt.get_cmap("viridis", max(len(weights), 2))
    for w_i, wid in enumerate(weights):
        xs, ys = [], []
        for x, n in enumerate(chain):
            vals = [s["mean_reward"] for s in n["scores"] if s["weights_id"] == wid]
            if vals:
                xs.append(x)
                ys.append(max(vals))
        ax.plot(xs, ys, marker="o", color=cmap(w_i), label=f"weights {wid}")
    ax.set_xticks(range(len(chain)), [f"{n['harness_id']}\n{n['origin']}" for n in chain], fontsize=7)
    ax.set(ylabel="harness-split mean reward", title=title)
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    if weights:
        ax.legend(fontsize=7)
    return save(fig, path)
