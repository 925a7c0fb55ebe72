"""The offline proposer: failure-directed edits of the incumbent's source, no network.

It reads the parent's failure profile from the harness-split rollouts (how often episodes end
unformatted, truncated, at the turn cap, with a wrong answer, with a tool error, without using a
tool), ranks the domain's primitives by the failures they address times a prior, and applies the
best ones to the parent's source, one mechanism per candidate. The parent is the incumbent,
unless another harness of the archive ties it on reward under the same weights with fewer
unsolved failures (a stepping stone: it searches, or stops truncating, where the incumbent does
not, and the reward cannot show it yet). Primitives already in the parent's lineage and sources
already in the archive are skipped. Seeded randomness only breaks
ties, so the same run state and seed give the same candidates. Candidates are ordinary harness
modules: the incumbent's code plus a short commented layer or an in-place edit.
"""
from __future__ import annotations

import json
import random
import re

import duckdb

from harnesses.proposers.base import Candidate, Proposal, ProposerContext, proposer_view
from harnesses.proposers.primitives import (
    FAILURES,
    DomainInfo,
    Edit,
    NotApplicable,
    Primitive,
    applied_tags,
    library,
)
from harnesses.sandbox import static_violations
from harnesses.validate import masked
from whale.ids import harness_id  # the archive's content address: a candidate's file name

# A primitive that addresses none of the measured failures still ranks by its prior.
BASE_RATE = 0.05
# Failures that keep an episode from being graded at all (see `unsolved`).
UNSOLVED = ("not_formatted", "truncated", "turn_cap", "error", "tool_error")
# What a tool failure looks like once a harness has rendered it (math tracebacks, search errors,
# chess "illegal"/"not a legal move"); the chess verifier also counts illegal moves itself.
_TOOL_ERROR = re.compile(r"\b(error|traceback|exception|illegal)\b|not a (legal )?move", re.I)


def failure_profile(con: duckdb.DuckDBPyConnection, harness_id: str) -> dict:
    """Rates of each failure kind over ``harness_id``'s harness-split rollouts.

    Uses the latest weights that have rollouts for this harness (the incumbent is re-evaluated
    after each weight phase). Kinds: ``not_formatted`` (no parsable answer, errors excluded),
    ``wrong`` (parsable but reward 0), ``truncated``, ``turn_cap``, ``error`` (stop reasons),
    ``tool_error`` (an observation shown to the model reports an error, a traceback or an illegal
    move, or the verdict counts illegal moves),
    ``no_tool`` (the environment never executed an action: a harness's own nudges do not count).
    Also ``n``, ``success``, ``mean_reward``, ``mean_turns``, ``mean_tokens_out`` and ``weights_id``.
    """
    rows = con.execute(
        """
        WITH latest AS (
            SELECT weights_id FROM rollouts WHERE harness_id = ? AND split = 'harness'
            GROUP BY weights_id ORDER BY max(cycle) DESC, max(step) DESC, weights_id LIMIT 1)
        SELECT weights_id, stop_reason, formatted, reward, turns, tokens_out, messages, verdict, tool_calls
        FROM rollouts WHERE harness_id = ? AND split = 'harness'
          AND weights_id = (SELECT weights_id FROM latest)
        """, [harness_id, harness_id]).fetchall()
    profile = {"n": len(rows), "weights_id": rows[0][0] if rows else None, "success": 0.0, "mean_reward": 0.0,
               "mean_turns": 0.0, "mean_tokens_out": 0.0, **{k: 0.0 for k in FAILURES}}
    if not rows:
        return profile
    counts = dict.fromkeys(FAILURES, 0)
    for _, stop, formatted, reward, _, _, messages, verdict, tool_calls in rows:
        counts["error"] += stop == "error"
        counts["truncated"] += stop == "truncated"
        counts["turn_cap"] += stop == "turn_cap"
        counts["not_formatted"] += stop != "error" and not formatted
        counts["wrong"] += bool(formatted) and (reward or 0) <= 0
        shown = _observations(messages)
        counts["tool_error"] += any(_TOOL_ERROR.search(text) for text in shown) or _illegal(verdict) > 0
        # stores from before the engine counted tool calls: nothing shown after the opening
        used = bool(shown) if tool_calls is None else tool_calls > 0
        counts["no_tool"] += stop != "error" and not used
    n = len(rows)
    profile.update({k: v / n for k, v in counts.items()})
    profile["success"] = sum((r[3] or 0) > 0 for r in rows) / n
    profile["mean_reward"] = sum(r[3] or 0 for r in rows) / n
    profile["mean_turns"] = sum(r[4] or 0 for r in rows) / n
    profile["mean_tokens_out"] = sum(r[5] or 0 for r in rows) / n
    return profile


def unsolved(profile: dict, tool_expected: bool) -> float:
    """How far a harness's episodes are from a gradable answer: the failure rates a better harness
    removes before the reward can move (a wrong but parsable answer is not among them)."""
    kinds = UNSOLVED + (("no_tool",) if tool_expected else ())
    return sum(profile[k] for k in kinds)


def stepping_stone(con: duckdb.DuckDBPyConnection, incumbent_id: str, tool_expected: bool) -> tuple[str, dict]:
    """The harness the next edits build on, and its failure profile.

    The incumbent, unless an ``ok`` harness scored under the incumbent's weights has at least its
    mean reward and strictly fewer unsolved failures: selection keeps the incumbent on a tie, but
    a search that only ever edits the incumbent cannot stack two changes that each fix one failure.
    """
    best, profile = incumbent_id, failure_profile(con, incumbent_id)
    if not profile["n"]:
        return best, profile
    others = con.execute(
        "SELECT DISTINCT r.harness_id FROM rollouts r JOIN harnesses h USING (harness_id) "
        "WHERE r.split = 'harness' AND r.weights_id = ? AND h.status = 'ok' AND r.harness_id <> ? "
        "ORDER BY r.harness_id", [profile["weights_id"], incumbent_id]).fetchall()
    for (hid,) in others:
        p = failure_profile(con, hid)
        if (p["weights_id"] == profile["weights_id"] and p["mean_reward"] >= profile["mean_reward"] - 1e-9
                and unsolved(p, tool_expected) < unsolved(profile, tool_expected) - 1e-9):
            best, profile = hid, p
    return best, profile


def _illegal(verdict) -> int:
    """Illegal moves the verifier counted (chess); 0 where the verdict has no such count."""
    if isinstance(verdict, str):
        verdict = json.loads(verdict)
    value = (verdict or {}).get("illegal", 0)
    return value if isinstance(value, int) else 0


def _observations(messages) -> list[str]:
    """Contents of the non-assistant messages after the first assistant turn."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    out, spoke = [], False
    for m in messages or []:
        if m.get("role") == "assistant":
            spoke = True
        elif spoke:
            out.append(str(m.get("content", "")))
    return out


def lineage_components(con: duckdb.DuckDBPyConnection, harness_id: str) -> list[str]:
    """Components of ``harness_id`` and all its ancestors (oldest first, no repeats)."""
    order, seen, frontier = [], set(), [harness_id]
    while frontier:
        hid = frontier.pop(0)
        if hid in seen:
            continue
        seen.add(hid)
        row = con.execute("SELECT components, parents FROM harnesses WHERE harness_id = ?", [hid]).fetchone()
        if row:
            order.append(list(row[0] or []))
            frontier += list(row[1] or [])
    out = []
    for components in reversed(order):
        out += [c for c in components if c not in out]
    return out


def rank(primitives: tuple[Primitive, ...], profile: dict, rng: random.Random) -> list[Primitive]:
    """Primitives by prior x (rate of the failures they address + a base rate); ties by ``rng``."""
    draws = [rng.random() for _ in primitives]
    scored = [(-round(p.prior * (sum(profile.get(a, 0.0) for a in p.addresses) + BASE_RATE), 9), d, i)
              for i, (p, d) in enumerate(zip(primitives, draws, strict=False))]
    return [primitives[i] for _, _, i in sorted(scored)]


class OfflineProposer:
    """Up to ``ctx.M`` candidates, each the incumbent plus one primitive; fewer (possibly none)
    when the library has nothing new left for this incumbent."""

    name = "offline"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def propose(self, ctx: ProposerContext) -> Proposal:
        if not (ctx.archive_dir / f"{ctx.incumbent_id}.py").is_file():
            raise FileNotFoundError(f"incumbent {ctx.incumbent_id} is not in the archive {ctx.archive_dir}")
        info, primitives = library(ctx.domain)
        view = proposer_view(ctx)
        try:
            parent, profile = stepping_stone(view, ctx.incumbent_id, info.tool_expected)
            lineage = lineage_components(view, parent)
        finally:
            view.close()
        source = (ctx.archive_dir / f"{parent}.py").read_text()
        lineage += [t for t in applied_tags(source) if t not in lineage]
        if ctx.prompt_only:
            primitives = tuple(p for p in primitives if p.prompt_only)
        rng = random.Random(f"offline:{self.seed}:{ctx.cycle}:{ctx.iteration}")
        edits = self._edits(rank(primitives, profile, rng), source, info, lineage, ctx)
        chosen = _diverse(edits, ctx.M)
        ties = f"{parent}, which ties incumbent {ctx.incumbent_id} on reward"
        label = parent if parent == ctx.incumbent_id else ties
        candidates = [Candidate(source=e.source, hypothesis=_hypothesis(p, profile, label),
                                axis=p.axis, components=lineage + [e.tag], parents=[parent],
                                origin="offline") for p, e in chosen]
        return Proposal(candidates=candidates, proposer=self.name, model=None)

    @staticmethod
    def _edits(ranked: list[Primitive], parent: str, info: DomainInfo, lineage: list[str],
               ctx: ProposerContext) -> list[tuple[Primitive, Edit]]:
        """Applicable, new, valid edits of the parent's source, in rank order."""
        out, seen = [], set()
        base = masked(parent) if ctx.prompt_only else None
        for p in ranked:
            try:
                edit = p.apply(parent, info)
            except NotApplicable:
                continue
            hid = harness_id(edit.source)
            if (edit.tag in lineage or hid in seen or (ctx.archive_dir / f"{hid}.py").exists()
                    or static_violations(edit.source)):
                continue
            if base is not None and masked(edit.source) != base:
                continue
            seen.add(hid)
            out.append((p, edit))
        return out


def _diverse(edits: list[tuple[Primitive, Edit]], m: int) -> list[tuple[Primitive, Edit]]:
    """The best ``m`` edits, one per axis first (as the Claude proposer is asked to), then by rank."""
    chosen, axes = [], set()
    for p, e in edits:
        if len(chosen) < m and p.axis not in axes:
            chosen.append((p, e))
            axes.add(p.axis)
    for pe in edits:
        if len(chosen) < m and pe not in chosen:
            chosen.append(pe)
    return sorted(chosen, key=edits.index)


def _hypothesis(p: Primitive, profile: dict, parent: str) -> str:
    """The primitive's claim plus the evidence it was chosen on."""
    if not profile["n"]:
        return f"{p.hypothesis} (no harness-split rollouts of {parent} yet)"
    seen = sorted((a for a in p.addresses if profile[a] > 0), key=lambda a: -profile[a])
    rates = ", ".join(f"{a.replace('_', ' ')} {profile[a]:.0%}" for a in seen) or "none of its failures seen"
    return f"{p.hypothesis} (parent {parent}: {rates} of {profile['n']} harness rollouts)"
