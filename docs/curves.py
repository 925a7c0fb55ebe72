"""Draw the learning curves of docs/results.md from docs/img/curves.csv (`make curves`).

The runs behind these curves predate the stores kept with results, so their points are the test
evaluations their tables report, copied into the CSV; the figures use `whale report`'s plotting.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {  # figure -> (title, the equal-rollout budget)
    "chess_seed": ("chess_puzzles from the seed h0", 640),
    "chess_handwritten": ("chess_puzzles from the hand-written h0", 640),
    "search_math": ("search_qa and math_reasoning from hand-written h0s", 640),
    "study": ("chess_puzzles study, mean of 3 seeds", 128),
}


def main(csv: Path = ROOT / "docs/img/curves.csv", out: Path = ROOT / "docs/img") -> None:
    sys.path.insert(0, str(ROOT))
    from whale.report.plots import plot_curves

    points = pd.read_csv(csv)
    unknown = sorted(set(points["figure"]) - set(FIGURES))
    if unknown:
        raise ValueError(f"{csv}: no figure named {unknown[0]!r}; known: {', '.join(FIGURES)}")
    for figure, rows in points.groupby("figure", sort=False):
        title, budget = FIGURES[figure]
        series = [{"label": label, "condition": run["condition"].iloc[0],
                   "evals": run.rename(columns={"rollouts": "cumulative_rollouts", "mean": "mean_at_k"})}
                  for label, run in rows.groupby("label", sort=False)]
        print(plot_curves(title, series, budget, out / f"curves-{figure}.png"))


if __name__ == "__main__":
    main()
