"""A harness's budgets as the literal class attributes of its ``Harness`` class, read and set in the source.

The budgets (``max_turns``, ``token_budget``, ``turn_tokens``: the tokens a seed harness asks for
per turn) are part of the harness code the proposer reads and rewrites, so a profile that needs
other budgets for h0 (the paper's 8192 tokens) sets them in h0's source, where the archive, the
proposer and the dry-run all see them, instead of overriding them behind the harness's back.
"""
from __future__ import annotations

import ast

NAMES = ("max_turns", "token_budget", "turn_tokens")


def _literals(source: str) -> dict[str, ast.Constant]:
    """``name -> the int literal node`` of each budget assigned in ``class Harness``'s body."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Harness":
            for stmt in node.body:
                if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in NAMES
                        and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
                    found[stmt.targets[0].id] = stmt.value
    return found


def read_budgets(source: str) -> dict[str, int]:
    """The budgets ``class Harness`` sets as int literals (a budget it inherits or computes is absent)."""
    return {name: node.value for name, node in _literals(source).items()}


def set_budgets(source: str, values: dict[str, int], where: str = "h0") -> str:
    """``source`` with each budget of ``values`` replaced in place; every one must be an int literal
    there already (a ValueError names the missing ones), so nothing is added that the harness ignores."""
    unknown = sorted(set(values) - set(NAMES))
    if unknown:
        raise ValueError(f"unknown harness budget(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    nodes = _literals(source)
    missing = sorted(set(values) - set(nodes))
    if missing:
        raise ValueError(f"{where}: class Harness sets no int literal {', '.join(missing)} to replace")
    lines = source.splitlines(keepends=True)
    # right to left within a line, bottom to top across lines: earlier offsets stay valid
    for name in sorted(values, key=lambda n: (nodes[n].lineno, nodes[n].col_offset), reverse=True):
        node = nodes[name]
        line = lines[node.lineno - 1]
        lines[node.lineno - 1] = line[:node.col_offset] + str(int(values[name])) + line[node.end_col_offset:]
    return "".join(lines)
