"""Two proposer tools beyond reading one file at a time: search across the run, edit by patch.

``search_run`` finds a regular expression in every archived harness source, the domain notes and
the harness-split rollout transcripts of the proposer's view, and answers with the matching
lines and where they are; ``apply_patch`` turns exact search-and-replace edits of an archived
harness into a whole module, so a proposer changes ten lines without retyping three hundred.
"""
from __future__ import annotations

import json
import re

import duckdb

from harnesses.proposers.base import ProposerContext
from whale.store import archive_queries

MAX_HITS = 60
MAX_PATTERN = 200


class ToolInputError(ValueError):
    """What is wrong with a tool call's arguments, said so the proposer can fix it."""


def _pattern(pattern: str) -> re.Pattern:
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN:
        raise ToolInputError(f"pattern must be a regular expression of 1 to {MAX_PATTERN} characters")
    try:
        return re.compile(pattern, re.I)
    except re.error as e:
        raise ToolInputError(f"not a regular expression: {e}") from None


def search_run(ctx: ProposerContext, view: duckdb.DuckDBPyConnection, pattern: str, where: str = "all") -> str:
    """Lines matching ``pattern`` in ``where``: ``harnesses``, ``notes``, ``rollouts`` or ``all``."""
    if where not in ("all", "harnesses", "notes", "rollouts"):
        raise ToolInputError("where must be one of all, harnesses, notes, rollouts")
    rx, hits = _pattern(pattern), []
    if where in ("all", "harnesses"):
        for path in sorted(ctx.archive_dir.glob("*.py")):
            hits += [f"harness {path.stem} line {n}: {line.strip()}"
                     for n, line in enumerate(path.read_text().splitlines(), 1) if rx.search(line)]
    if where in ("all", "notes") and ctx.notes_path.is_file():
        hits += [f"notes line {n}: {line.strip()}"
                 for n, line in enumerate(ctx.notes_path.read_text().splitlines(), 1) if rx.search(line)]
    if where in ("all", "rollouts"):
        rows = archive_queries.rollout_messages(view)
        for hid, weights, example, sample, reward, messages in rows:
            for turn, m in enumerate(json.loads(messages) if isinstance(messages, str) else messages or []):
                text = str(m.get("content", ""))
                for match in list(rx.finditer(text))[:2]:
                    around = text[max(0, match.start() - 80):match.end() + 80].replace("\n", " ")
                    hits.append(f"rollout {hid}/{weights}/{example}#{sample} (reward {reward}) message {turn} "
                                f"({m.get('role')}): ...{around}...")
    if not hits:
        return f"no match for {pattern!r} in {where}"
    shown = hits[:MAX_HITS]
    more = f"\n... {len(hits) - MAX_HITS} more: narrow the pattern or `where`" if len(hits) > MAX_HITS else ""
    return "\n".join(shown) + more


def apply_patch(source: str, edits: list) -> str:
    """``source`` with each ``{"old": ..., "new": ...}`` replacement applied in order; every
    ``old`` must occur exactly once in the text it is applied to."""
    if not isinstance(edits, list) or not edits:
        raise ToolInputError("edits must be a non-empty list of {old, new} objects")
    for i, edit in enumerate(edits, 1):
        if not (isinstance(edit, dict) and isinstance(edit.get("old"), str) and isinstance(edit.get("new"), str)):
            raise ToolInputError(f"edit {i} must be an object with string fields old and new")
        count = source.count(edit["old"]) if edit["old"] else 0
        if count != 1:
            found = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolInputError(f"edit {i}: old text {found} in the source (after edits 1..{i - 1}); "
                                 "quote it exactly, with enough lines to be unique")
        source = source.replace(edit["old"], edit["new"], 1)
    return source
