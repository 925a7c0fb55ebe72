"""Failure profiles of archived harnesses, read from their harness-split rollouts.

What the offline proposer ranks its primitives by: how often a harness's episodes end
unformatted, truncated, at the turn cap, with a wrong answer, with a tool error, without using a
tool; and the stepping stone, the harness next edits build on.
"""
from __future__ import annotations

import json
import re

import duckdb

from harnesses.proposers.primitives import FAILURES
from whale.store.archive_queries import components_and_parents, latest_harness_episodes, scored_peers

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
    rows = latest_harness_episodes(con, harness_id)
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
    for hid in scored_peers(con, profile["weights_id"], incumbent_id):
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
        row = components_and_parents(con, hid)
        if row:
            order.append(row[0])
            frontier += row[1]
    out = []
    for components in reversed(order):
        out += [c for c in components if c not in out]
    return out
