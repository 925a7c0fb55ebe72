"""Validation of a candidate before any rollout budget is spent on it.

``invalid``: the source breaks the rules (static check, the contract, prompt-only mode) and never
runs. ``error``: it loads but fails when run (the smoke rollout). Both are recorded with the
reason; neither stops the search.
"""
from __future__ import annotations

import ast

from harnesses.sandbox import HarnessSandbox, Limits, SandboxError, static_violations

_PLACEHOLDER = "\u2063"


def masked(source: str) -> str:
    """The syntax tree with all prompt text blanked (string constants and f-string text parts):
    two sources are the same code when their masks are equal."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = _PLACEHOLDER
        if isinstance(node, ast.JoinedStr):  # an f-string's text parts count as prompt text too
            node.values = [v for v in node.values if not isinstance(v, ast.Constant)]
    return ast.dump(tree, include_attributes=False)


def prompt_only_violation(candidate: str, incumbent: str) -> str | None:
    """None when ``candidate`` equals ``incumbent`` up to string literals (prompt text)."""
    if masked(candidate) != masked(incumbent):
        return "prompt-only mode: the candidate changes code, not only prompt text"
    return None


def check_candidate(source: str, limits: Limits, incumbent: str | None = None,
                    prompt_only: bool = False) -> str | None:
    """The reason a candidate is invalid, or None when it may be smoke-tested."""
    bad = static_violations(source)
    if bad:
        return "static check failed:\n" + "\n".join(bad)
    if prompt_only and incumbent is not None:
        reason = prompt_only_violation(source, incumbent)
        if reason:
            return reason
    try:
        with HarnessSandbox(source, limits):
            pass
    except SandboxError as e:
        return f"contract check failed: {e}"
    return None


def smoke_error(rollouts) -> str | None:
    """The first error among smoke rollouts (a candidate must run cleanly end to end)."""
    for r in rollouts:
        if r.stop_reason == "error":
            return r.error or "rollout error"
    return None
