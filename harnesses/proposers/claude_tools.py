"""The tools Claude uses during one proposer session, and the checks on what it writes.

Every tool answers with text (a tool_result); mistakes come back as ``is_error`` results that
say what to fix, so Claude can correct a candidate instead of losing the slot.
"""
from __future__ import annotations

import ast
import json
import re

import duckdb

from harnesses.proposers.archive_tools import ToolInputError, apply_patch, search_run
from harnesses.proposers.base import AXES, Candidate, ProposerContext
from harnesses.proposers.sql_tool import DEFAULT_SQL_LIMITS, SqlLimits, SqlRefused, run_select
from harnesses.proposers.sql_tool import cap as _cap
from harnesses.sandbox import static_violations
from harnesses.validate import prompt_only_violation
from whale.ids import harness_id
from whale.store import archive_queries

MAX_RESULT_CHARS = 30_000  # any one tool result
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# What every submitted candidate states about itself (write_candidate, edit_candidate).
CLAIM = {
    "hypothesis": {"type": "string", "description": "one falsifiable sentence: what fails, "
                   "which change fixes it, what score moves"},
    "axis": {"type": "string", "enum": list(AXES)},
    "components": {"type": "array", "items": {"type": "string"},
                   "description": "short tags of the mechanisms used"},
}
SPECS = [
    {"name": "list_harnesses",
     "description": "Every archived harness: id, parents, origin, status (error text if any), "
                    "hypothesis, axis, and its harness-split scores per weights id. "
                    "The incumbent is marked.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "read_harness", "description": "The full source of one archived harness.",
     "input_schema": {"type": "object", "properties": {"harness_id": {"type": "string"}},
                      "required": ["harness_id"]}},
    {"name": "read_notes", "description": "The domain's notes: environment, tools, verifier facts.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "read_contract", "description": "The harness contract every candidate must follow.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "sql", "description": "",  # filled in with the view's schema
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}},
                      "required": ["query"]}},
    {"name": "write_candidate",
     "description": "Submit one complete candidate harness module (it must define class "
                    "Harness(BaseHarness)). Syntax and contract problems come back as errors: "
                    "fix them and submit again.",
     "input_schema": {"type": "object", "properties": {
         "source": {"type": "string", "description": "the whole Python module"},
         **CLAIM,
         "parents": {"type": "array", "items": {"type": "string"},
                     "description": "harness ids this builds on (default: the incumbent)"}},
         "required": ["source", "hypothesis", "axis", "components"]}},
    {"name": "search",
     "description": "Find a regular expression (case-insensitive) in every archived harness's "
                    "source, the domain notes and the harness-split rollout transcripts; answers "
                    "the matching lines and where they are (harness id and line, or rollout "
                    "harness/weights/example#sample, its reward and message).",
     "input_schema": {"type": "object", "properties": {
         "pattern": {"type": "string"},
         "where": {"type": "string", "enum": ["all", "harnesses", "notes", "rollouts"]}},
         "required": ["pattern"]}},
    {"name": "edit_candidate",
     "description": "Submit a candidate as exact search-and-replace edits of an archived harness "
                    "(each `old` must occur exactly once); the result is checked and submitted "
                    "as write_candidate would, with that harness as its parent.",
     "input_schema": {"type": "object", "properties": {
         "base": {"type": "string", "description": "the archived harness id to edit"},
         "edits": {"type": "array", "items": {"type": "object", "properties": {
             "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}},
         **CLAIM}, "required": ["base", "edits", "hypothesis", "axis", "components"]}},
    {"name": "try_candidate",
     "description": "Roll a draft module once on a few harness-split examples under the current "
                    "weights, before submitting it: answers each rollout's reward, stop reason, "
                    "turns and any leak/unauthored verdict, and one transcript. Charged to the "
                    "run's rollout budget; a few per iteration. The draft is not submitted.",
     "input_schema": {"type": "object", "properties": {"source": {"type": "string",
                                                                  "description": "the whole Python module"}},
                      "required": ["source"]}},
    {"name": "finish", "description": "End the session once the candidates are written.",
     "input_schema": {"type": "object", "properties": {}}},
]


class ToolError(Exception):
    """A mistake in a tool call; its text goes back to Claude as an error result."""


class Workbench:
    """The tools of one proposer session over a read-only view of the run."""

    def __init__(self, ctx: ProposerContext, view: duckdb.DuckDBPyConnection,
                 sql_limits: SqlLimits = DEFAULT_SQL_LIMITS, origin: str = "claude"):
        self.ctx = ctx
        self.view = view
        self.origin = origin  # the archive's record of who wrote the candidates
        self.sql_limits = sql_limits
        self.candidates: list[Candidate] = []
        self.finished = False

    def offered(self) -> set[str]:
        """The tools of this session: ``try_candidate`` only where drafts can run."""
        return {s["name"] for s in SPECS if s["name"] != "try_candidate" or self.ctx.trial is not None}

    def specs(self) -> list[dict]:
        specs = [dict(s) for s in SPECS if s["name"] in self.offered()]
        sql = next(s for s in specs if s["name"] == "sql")
        sql["description"] = (
            f"Run one read-only SELECT/WITH query (DuckDB SQL; {self.sql_limits.describe()}). "
            f"Only harness-split rows exist here. Tables:\n{self.schema()}")
        return specs

    def schema(self) -> str:
        lines = []
        for (table,) in self.view.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            cols = self.view.execute(f"DESCRIBE {table}").fetchall()
            lines.append(f"{table}({', '.join(f'{c[0]} {c[1]}' for c in cols)})")
        return "\n".join(lines)

    def run(self, name: str, args: dict) -> tuple[str, bool]:
        """Run tool ``name``; returns (result text, is_error)."""
        handler = getattr(self, f"tool_{name}", None)
        if handler is None or name not in self.offered():
            return f"unknown tool {name!r}", True
        try:
            out = handler(**(args or {}))
        except ToolError as e:
            return str(e), True
        except TypeError as e:
            return f"bad arguments for {name}: {e}", True
        return _cap(out, MAX_RESULT_CHARS), False

    def tool_list_harnesses(self) -> str:
        rows = archive_queries.archived_harnesses(self.view)
        scores = archive_queries.all_scores(self.view)
        out = []
        for hid, parents, origin, status, err, hyp, axis, cycle, it in rows:
            entry = {"harness_id": hid, "incumbent": hid == self.ctx.incumbent_id, "parents": parents,
                     "origin": origin, "status": status, "hypothesis": hyp, "axis": axis,
                     "cycle": cycle, "iteration": it,
                     "scores": [_score(s) for s in scores if s[0] == hid]}
            if err:
                entry["error"] = _cap(err, 600)
            out.append(json.dumps(entry, default=str))
        return "\n".join(out) or "the archive is empty"

    def tool_read_harness(self, harness_id: str) -> str:
        if not isinstance(harness_id, str) or not _ID.match(harness_id):
            raise ToolError(f"not a harness id: {harness_id!r}")
        path = self.ctx.archive_dir / f"{harness_id}.py"
        if not path.is_file():
            raise ToolError(f"no archived harness {harness_id!r}; list_harnesses shows the ids")
        return path.read_text()

    def tool_read_notes(self) -> str:
        path = self.ctx.notes_path
        return path.read_text() if path.is_file() else f"(no notes for {self.ctx.domain})"

    def tool_read_contract(self) -> str:
        path = self.ctx.contract_path
        if not path.is_file():
            raise ToolError(f"contract {path} is missing")
        text = f"# {path.name}\n{path.read_text()}"
        readme = path.parent / "README.md"
        return text + (f"\n\n# {readme.name}\n{readme.read_text()}" if readme.is_file() else "")

    def tool_sql(self, query: str) -> str:
        try:
            return run_select(self.view, query, self.sql_limits)
        except SqlRefused as e:
            raise ToolError(str(e)) from None

    def tool_search(self, pattern: str, where: str = "all") -> str:
        try:
            return search_run(self.ctx, self.view, pattern, where)
        except ToolInputError as e:
            raise ToolError(str(e)) from None

    def tool_edit_candidate(self, base: str, edits: list, hypothesis: str, axis: str, components: list) -> str:
        source = self.tool_read_harness(base)
        try:
            patched = apply_patch(source, edits)
        except ToolInputError as e:
            raise ToolError(str(e)) from None
        return self.tool_write_candidate(patched, hypothesis, axis, components, parents=[base])

    def tool_write_candidate(self, source: str, hypothesis: str, axis: str, components: list,
                             parents: list | None = None) -> str:
        if len(self.candidates) >= self.ctx.M:
            raise ToolError(f"all {self.ctx.M} candidates are written; call finish")
        if not isinstance(hypothesis, str) or not hypothesis.strip():
            raise ToolError("hypothesis must be one non-empty sentence")
        if axis not in AXES:
            raise ToolError(f"axis must be one of {', '.join(AXES)}")
        if not self.ctx.prompt_only and len(self.candidates) < len(AXES) and \
                axis in {c.axis for c in self.candidates}:
            raise ToolError(f"a candidate on axis {axis!r} is already written: use another axis")
        if not (isinstance(components, list) and all(isinstance(c, str) for c in components)):
            raise ToolError("components must be a list of strings")
        parents = parents or [self.ctx.incumbent_id]
        for p in parents:
            if not (isinstance(p, str) and _ID.match(p) and (self.ctx.archive_dir / f"{p}.py").is_file()):
                raise ToolError(f"parent {p!r} is not an archived harness")
        problem = check_source(source, self._incumbent_source() if self.ctx.prompt_only else None)
        if problem:
            raise ToolError(problem)
        hid = harness_id(source)
        if (self.ctx.archive_dir / f"{hid}.py").is_file() or hid in {harness_id(c.source) for c in self.candidates}:
            raise ToolError(f"this source is identical to harness {hid}: change the mechanism")
        replayed = next((p for p in parents if self.ctx.duplicate and self.ctx.duplicate(source, p)), None)
        if replayed:  # the run would reject it unevaluated (harness_search.skip_duplicates)
            raise ToolError(f"this candidate replays the recorded harness-split episodes of its parent {replayed} "
                            "token for token, with the same rewards: it changes nothing the model sees or "
                            "how its replies are read on those episodes; change the mechanism")
        self.candidates.append(Candidate(source=source, hypothesis=hypothesis.strip(), axis=axis,
                                         components=list(components), parents=list(parents),
                                         origin=self.origin))
        left = self.ctx.M - len(self.candidates)
        return f"candidate {len(self.candidates)} accepted ({hid}); " + (
            f"{left} more to write" if left else "all written: call finish")

    def tool_try_candidate(self, source: str) -> str:
        problem = check_source(source, self._incumbent_source() if self.ctx.prompt_only else None)
        if problem:
            raise ToolError(problem)
        try:
            return self.ctx.trial(source)
        except ValueError as e:
            raise ToolError(str(e)) from None

    def tool_finish(self) -> str:
        if not self.candidates:
            raise ToolError("no candidate written yet: write at least one before finishing")
        self.finished = True
        return f"finished with {len(self.candidates)} candidate(s)"

    def _incumbent_source(self) -> str:
        return (self.ctx.archive_dir / f"{self.ctx.incumbent_id}.py").read_text()


def check_source(source: str, incumbent: str | None = None) -> str | None:
    """What is wrong with a candidate module, or None. ``incumbent``: prompt-only mode.

    The same static rules as the sandbox and the same prompt-only rule as the harness phase's
    validation (``harnesses.validate``), so Claude hears of a problem while it can still fix it.
    """
    if not isinstance(source, str) or not source.strip():
        return "source must be the whole module as a non-empty string"
    try:
        ast.parse(source)
    except SyntaxError as e:
        line = (e.text or "").rstrip()
        return f"SyntaxError: {e.msg} (line {e.lineno}, column {e.offset}): {line}"
    bad = static_violations(source)
    if bad:
        return "the sandbox refuses this module:\n" + "\n".join(bad)
    return prompt_only_violation(source, incumbent) if incumbent is not None else None


def _score(row: tuple) -> dict:
    keys = ("weights_id", "cycle", "iteration", "n", "mean_reward", "format_rate",
            "truncation_rate", "error_rate", "mean_turns")
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in zip(keys, row[1:], strict=False)}
