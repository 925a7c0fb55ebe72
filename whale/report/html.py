"""The HTML page of `whale report`: one self-contained file (inline CSS, PNGs as data URIs, no
script and nothing fetched from the network), so it renders offline in any browser."""
from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from whale.report.analysis import RULES
from whale.store import score_label

CSS = """
body { font-family: sans-serif; margin: 24px auto; max-width: 1150px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #ccc; margin-top: 2em; } h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 8px; overflow-x: auto; font-size: 0.8em; }
.warn { background: #fff3cd; border: 1px solid #e0c060; padding: 8px; }
.missing { color: #a33; } code { font-size: 0.85em; } .rule { color: #555; font-size: 0.9em; }
.add { color: #060; } .del { color: #a00; } .hunk { color: #00a; }
"""


class Raw(str):
    """Markup that is already escaped."""


def cell(v) -> str:
    if isinstance(v, Raw):
        return v
    if isinstance(v, float):
        return f"{v:.4f}"
    return escape("" if v is None else str(v))


def table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f"<td class=\"num\">{cell(v)}</td>" if isinstance(v, (int, float)) and not isinstance(v, bool)
        else f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def image(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<p><img alt="{escape(alt)}" src="data:image/png;base64,{data}"></p>'


def render(domains: list[dict], warnings: list[str], sources: list[str]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>WHALE report</title>", f"<style>{CSS}</style></head><body>", "<h1>WHALE report</h1>",
             f"<p>{len(sources)} run database(s) read: {escape(', '.join(sources)) or 'none'}.</p>"]
    if warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in warnings)
        parts.append(f'<div class="warn"><b>Not included:</b><ul>{items}</ul></div>')
    parts.append(f'<pre class="rule">{escape(RULES.strip())}</pre>')
    if not domains:
        parts.append("<p>No run with test evaluations was found.</p>")
    if len(domains) > 1:
        parts.append("<ul>" + "".join(f'<li><a href="#{escape(d["anchor"])}">{escape(d["domain"])}</a></li>'
                                      for d in domains) + "</ul>")
    parts += [_domain(d) for d in domains]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _domain(d: dict) -> str:
    if d["empty"]:
        return (f'<h2 id="{escape(d["anchor"])}">{escape(d["domain"])}</h2><p>No test evaluations yet; runs: '
                f'{escape(", ".join(d["unevaluated"]))}.</p>')
    out = [f'<h2 id="{escape(d["anchor"])}">{escape(d["domain"])}</h2>',
           "<h3>Test accuracy against cumulative rollouts</h3>", image(d["images"]["curve"], f"{d['domain']} curves")]
    out += _conditions(d)
    out += _steps(d)
    out += _decomposition(d)
    out += ["<h3>Rollouts by phase</h3>", image(d["images"]["rollouts"], f"{d['domain']} rollouts by phase"),
            table(["condition", "run", "weight", "harness", "eval", "total", "code (each start)"],
                  [[r["label"], r["run_id"], *(r["by_phase"].get(p, 0) for p in ("weight", "harness", "eval")),
                    sum(r["by_phase"].values()), r["code"]] for r in d["rollouts"]])]
    out += ["<h3>Harness proposer cost</h3>", image(d["images"]["proposer"], f"{d['domain']} proposer cost"),
            table(["condition", "run", "proposer", "calls", "input tokens", "output tokens", "cost (USD)",
                   "fallbacks"],
                  [[r["label"], r["run_id"], r["proposers"], r["calls"], r["input_tokens"], r["output_tokens"],
                    r["cost_usd"], r["fallbacks"]] for r in d["proposer"]])]
    out += _lineages(d)
    if d["unevaluated"]:
        out.append("<p>Runs of this domain without test evaluations (their test rollouts still fill 2x2 cells): "
                   f"{escape(', '.join(d['unevaluated']))}.</p>")
    return "\n".join(out)


def _conditions(d: dict) -> list[str]:
    rows = [[r["label"], r["run_id"], r["final_mean_at_k"], _ci(r["final_ci"]), _opt(r["final_null_reward"]),
             r["final_rollouts"], r["best_mean_at_k"], r["rollouts_at_best"], r["at_equal_rollouts"], r["points"]]
            for r in d["conditions"]]
    k = d["conditions"][0]["k"]
    return [f"<h3>Final test mean@{k} (95 % interval), best and at equal rollouts</h3>",
            f'<p class="rule">Equal-rollout budget B = {d["budget"]} rollouts (the smallest final budget among '
            "these runs); \"at equal rollouts\" is each run's best test mean@k among its evaluations with "
            "cumulative weight + harness rollouts &le; B.</p>",
            table(["condition", "run", f"final mean@{k}", "95 % interval", "null reward of its harness",
                   "final rollouts", f"best mean@{k} (max, optimistic)", "rollouts at best",
                   f"at equal rollouts (≤ {d['budget']})", "evaluations"], rows),
            "<h3>Paired comparison of the final scores</h3>", f"<pre>{escape(d['comparison'])}</pre>"]


def _steps(d: dict) -> list[str]:
    out = ["<h3>What each phase bought</h3>",
           '<p class="rule">Each evaluation where the weights or the harness changed, against the previous one '
           "on the same test examples and seeds (paired bootstrap, 95 %); an interval that holds 0 is noise.</p>"]
    for run in d["steps"]:
        rows = [[p["label"] if p["label"] == "end - start" else f"cycle {p['cycle']}, {p['label']}",
                 p["cumulative_rollouts"], p["changed"] or "-",
                 "-" if p["estimate"] is None else str(p["estimate"]), _delta(p["delta"])] for p in run["points"]]
        out += [f"<h4>{escape(run['label'])} ({escape(run['run_id'])})</h4>",
                table(["point", "rollouts", "changed", f"test mean@{run['k']} [95 %]", "difference [95 %]"], rows)]
    return out


def _delta(x) -> str:
    return "-" if x is None else f"{x.mean:+.3f} [{x.lo:+.3f}, {x.hi:+.3f}]"


def _opt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ci(ci) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _decomposition(d: dict) -> list[str]:
    out = ["<h3>2x2 decomposition: weights x harness</h3>",
           image(d["images"]["decomposition"], f"{d['domain']} decomposition")]
    for r in d["decomposition"]:
        ids = r["ids"]
        rows = []
        for w in ("base", "final"):
            row = [f"{w} weights ({ids['base'] if w == 'base' else ids['final_weights']})"]
            row += [_cell(r["cells"][(w, h)]) for h in ("h0", "final")]
            rows.append(row)
        gains = ", ".join(f"{k} {v:+.4f}" for k, v in r["gains"].items() if v is not None) or "needs base x h0"
        out += [f"<h4>{escape(r['label'])}</h4>",
                table([f"test mean@{ids['k']}", f"h0 ({ids['h0']})", f"final harness ({ids['final_harness']})"], rows),
                f"<p>gains over base x h0: {escape(gains)}</p>"]
    return out


def _cell(c: dict) -> Raw:
    if c.get("value") is not None:
        return Raw(f"<b>{c['value']:.4f}</b><br><small>{escape(c['source'])}</small>")
    return Raw(f'<span class="missing">not measured</span><br><code>{escape(c["command"])}</code>')


def _lineages(d: dict) -> list[str]:
    out = ["<h3>Lineage of the final harness</h3>"]
    if not d["lineages"]:
        out.append("<p>No run of this domain has a harness phase.</p>")
    for lin in d["lineages"]:
        rows = []
        for n in lin["nodes"]:
            scores = "; ".join(f"{s['weights_id']}: {s['mean_reward']:.3f} "
                               f"({score_label(s['cycle'], s['iteration'])}, n={s['n']})"
                               for s in n["scores"]) or "none"
            where = "" if n["cycle"] is None else f"c{n['cycle']} i{n['iteration']}"
            rows.append([n["harness_id"], n["origin"] if n["known"] else "(not in archive)", where, n["axis"],
                         n["status"], n["hypothesis"], scores])
        out += [f"<h4>{escape(lin['label'])}: final harness {escape(lin['final'])}</h4>",
                image(lin["image"], f"lineage {lin['run_id']}"),
                table(["harness", "origin", "proposed", "axis", "status", "hypothesis",
                       "harness-split mean reward by weights id"], rows),
                f"<p>Diff of the final harness against h0 ({escape(lin['h0'])}):</p>",
                f"<pre>{_diff(lin['diff'])}</pre>"]
    return out


def _diff(text: str) -> str:
    """The diff escaped, with added, removed and hunk-header lines coloured."""
    out = []
    for line in text.splitlines():
        kind = "hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++") \
            else "del" if line.startswith("-") and not line.startswith("---") else ""
        body = escape(line, quote=False)
        out.append(f'<span class="{kind}">{body}</span>' if kind else body)
    return "\n".join(out)
