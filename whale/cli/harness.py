"""`whale harness show|diff|lineage`: read one run's harness archive without writing to it.

A run directory holds the sources (``harnesses/<harness_id>.py``) and the DuckDB tables that
describe them: ``harnesses`` (parents, origin, hypothesis, status), ``scores`` (per weights id)
and ``phases`` (which harness each phase accepted). The database is opened read-only, so these
commands never take the writer's place; while a run is writing, DuckDB refuses the connection and
the error says so.
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path

import duckdb

from harnesses.archive import first_parents
from whale.store import Store, archive_queries, find_stores, read_through_snapshot, score_label, store_path

FIELDS = ("harness_id", "domain", "parents", "origin", "hypothesis", "axis", "components",
          "status", "error", "cycle", "iteration", "null_reward")


def run_dir_for(runs_dir: str | Path = "runs", run_id: str | None = None) -> Path:
    """``runs_dir/run_id``; without a run id, the only run under ``runs_dir`` (an error if several)."""
    runs_dir = Path(runs_dir)
    if run_id:
        return runs_dir / run_id
    found = [p.parent.name for p in find_stores(runs_dir)]
    if len(found) != 1:
        listed = ", ".join(found) if found else "none"
        raise ValueError(f"{runs_dir}: pass --run (runs found: {listed})")
    return runs_dir / found[0]


def _open(run_dir: Path) -> Store:
    path = store_path(run_dir)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: {run_dir} is not a run directory")
    try:
        store, note = read_through_snapshot(path, lambda p: Store(p, read_only=True))
    except (duckdb.IOException, duckdb.ConnectionException) as e:
        raise ValueError(f"{path} is held by its writer (a run in progress?): {e}") from None
    if note:
        print(note, file=sys.stderr)
    return store


def _resolve(store: Store, ref: str) -> str:
    """The harness id that ``ref`` names: a whole id or a unique prefix of one."""
    ids = archive_queries.ids_starting_with(store.con, ref)
    if not ids:
        raise ValueError(f"{store.path}: no harness id starts with {ref!r}")
    if len(ids) > 1 and ref not in ids:
        raise ValueError(f"{store.path}: {ref!r} is ambiguous ({', '.join(ids)})")
    return ref if ref in ids else ids[0]


def _source(run_dir: Path, hid: str) -> str:
    path = Path(run_dir) / "harnesses" / f"{hid}.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the archive lists {hid} but its source is gone")
    return path.read_text()


def _meta(store: Store) -> dict[str, dict]:
    rows = archive_queries.harness_rows(store.con, list(FIELDS))
    return {r[0]: dict(zip(FIELDS, r, strict=False)) for r in rows}


def _best_scores(store: Store) -> dict[str, list[tuple[str, float]]]:
    """Best harness-split score of each harness per weights id, in the order the weights first appeared."""
    rows = archive_queries.best_scores(store.con)
    out: dict[str, list[tuple[str, float]]] = {}
    for hid, wid, best, _ in rows:
        out.setdefault(hid, []).append((wid, best))
    return out


def _roles(store: Store) -> dict[str, list[str]]:
    """What each harness was to the run's phases: accepted by a harness phase, trained under in a weight phase."""
    out: dict[str, list[str]] = {}
    for cycle, phase, hid in archive_queries.phase_harnesses(store.con):
        label = f"accepted c{cycle}" if phase == "harness" else f"weights c{cycle}"
        out.setdefault(hid, []).append(label)
    return out


def _one_line(text: str | None, width: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def show(run_dir: str | Path, harness_id: str) -> str:
    """Metadata, scores per weights id, phase roles and the source of one harness."""
    with _open(Path(run_dir)) as store:
        hid = _resolve(store, harness_id)
        meta = _meta(store)[hid]
        scores = archive_queries.harness_scores(store.con, hid)
        roles = _roles(store).get(hid, [])
    lines = [f"harness {hid}  ({meta['domain']}, origin {meta['origin']}, status {meta['status']})",
             f"  created in cycle {meta['cycle']}, iteration {meta['iteration']}",
             f"  parents:    {', '.join(meta['parents'] or []) or '-'}",
             f"  axis:       {meta['axis'] or '-'}",
             f"  components: {', '.join(meta['components'] or []) or '-'}",
             f"  hypothesis: {meta['hypothesis'] or '-'}",
             f"  null reward: {'-' if meta['null_reward'] is None else format(meta['null_reward'], '.3f')}"
             "  (harness split, a policy that ignores its input)"]
    if meta["error"]:
        lines.append("  error:      " + meta["error"].rstrip().replace("\n", "\n              "))
    if roles:
        lines.append(f"  phases:     {', '.join(roles)}")
    lines.append("scores:" if scores else "scores: none")
    for wid, split, cycle, it, n, mean, fmt, trunc, err, turns in scores:
        lines.append(f"  weights {wid}  {split:<7} {score_label(cycle, it)}  mean {mean:.3f} over {n}  "
                     f"format {fmt:.2f}  truncated {trunc:.2f}  errors {err:.2f}  turns {turns:.2f}")
    lines += ["", f"# --- {hid}.py ---", _source(Path(run_dir), hid).rstrip("\n")]
    return "\n".join(lines) + "\n"


def diff(run_dir: str | Path, a: str, b: str) -> str:
    """Unified diff from harness ``a``'s source to harness ``b``'s ('' when they are the same)."""
    with _open(Path(run_dir)) as store:
        ha, hb = _resolve(store, a), _resolve(store, b)
    sa, sb = _source(Path(run_dir), ha), _source(Path(run_dir), hb)
    return "".join(difflib.unified_diff(sa.splitlines(keepends=True), sb.splitlines(keepends=True),
                                        fromfile=f"{ha}.py", tofile=f"{hb}.py"))


def _children(meta: dict[str, dict]) -> dict[str | None, list[str]]:
    """Tree edges through each harness's first parent; a harness whose parent is not archived is a root."""
    kids: dict[str | None, list[str]] = {}
    for hid, m in meta.items():
        parent = (m["parents"] or [None])[0]
        kids.setdefault(parent if parent in meta else None, []).append(hid)
    return kids


def _node(hid: str, m: dict, scores: list[tuple[str, float]], roles: list[str]) -> str:
    best = "  ".join(f"{w}={s:.3f}" for w, s in scores) or "unscored"
    extra = [f"also from {', '.join(m['parents'][1:])}"] if len(m["parents"] or []) > 1 else []
    text = f"{hid} [{m['origin']}, {m['status']}] {best}"
    if roles:
        text += "  <- " + ", ".join(roles)
    failed = m["status"] in ("error", "invalid") and m["error"]
    # a traceback's last line names the exception; the hypothesis matters more for a working harness
    note = _one_line(m["error"].strip().splitlines()[-1] if failed else m["hypothesis"])
    return text + "".join(f"  ({e})" for e in extra) + (f"  \"{note}\"" if note else "")


def lineage(run_dir: str | Path, harness_id: str | None = None) -> str:
    """The archive as a tree (through first parents) from every seed, or from ``harness_id``.

    Each node: id, origin, status, best harness-split score per weights id, the phases that
    accepted it (or trained under it), and its hypothesis (its error when it failed).
    """
    with _open(Path(run_dir)) as store:
        meta, scores, roles = _meta(store), _best_scores(store), _roles(store)
        root = _resolve(store, harness_id) if harness_id else None
    if not meta:
        return "the archive is empty\n"
    kids = _children(meta)
    lines: list[str] = []
    if root:
        chain = [h for h in first_parents(root, {h: m["parents"] for h, m in meta.items()})[1:] if h in meta]
        if chain:
            lines.append("ancestors: " + " <- ".join(chain))

    def walk(hid: str, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(prefix + branch + _node(hid, meta[hid], scores.get(hid, []), roles.get(hid, [])))
        below = kids.get(hid, [])
        for i, child in enumerate(below):
            walk(child, "" if top else prefix + ("    " if last else "│   "), i == len(below) - 1, False)

    for hid in [root] if root else kids.get(None, []):
        walk(hid, "", True, True)
    return "\n".join(lines) + "\n"


def run_command(action: str, run_dir: str | Path, ids: list[str]) -> str:
    """The text of ``whale harness <action> <ids…>`` on ``run_dir``."""
    arity = {"show": (1, 1), "diff": (2, 2), "lineage": (0, 1)}
    if action not in arity:
        raise ValueError(f"unknown harness action {action!r}; choose show, diff or lineage")
    lo, hi = arity[action]
    if not lo <= len(ids) <= hi:
        raise ValueError(f"`whale harness {action}` takes {lo}" + (f" to {hi}" if hi != lo else "") + " harness id(s)")
    if action == "show":
        return show(run_dir, ids[0])
    if action == "diff":
        return diff(run_dir, ids[0], ids[1])
    return lineage(run_dir, ids[0] if ids else None)


def add_arguments(p) -> None:
    p.add_argument("action", choices=["show", "diff", "lineage"],
                   help="show ID | diff A B | lineage [ID] (tree from the seeds, or from ID)")
    p.add_argument("ids", nargs="*", help="harness ids or unique prefixes of them")
    p.add_argument("--run", default=None, help="run id (default: the only run under --runs)")
    p.add_argument("--runs", default="runs")


def run(args, settings) -> None:
    print(run_command(args.action, run_dir_for(args.runs, args.run), args.ids), end="")
