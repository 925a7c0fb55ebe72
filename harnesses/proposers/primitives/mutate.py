"""Mutations: a harness's integer constants and prompt sentences changed where they are written.

Unlike a primitive, a mutation knows no failure it addresses: it is the search's way to try
values and wordings no primitive names. Two kinds, both in place on the syntax tree:
- an **integer constant** (a module constant, a class attribute, ``self.<name> = <int>`` in
  ``__init__``) doubled, halved or moved by one, within the contract's hard caps;
- a **prompt sentence** dropped from a prose literal of two or more sentences (never the one
  that names the answer format).
Each marks itself ``# offline proposer: <tag>`` where the line has room for a comment.
"""
from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass

from harnesses.contract import HARD_MAX_TURNS, HARD_TOKEN_BUDGET
from harnesses.proposers.primitives.common import Edit
from harnesses.proposers.primitives.edit import MARK, NotApplicable, _prose_nodes, quote, set_literal

CAPS = {"max_turns": HARD_MAX_TURNS, "token_budget": HARD_TOKEN_BUDGET, "turn_tokens": HARD_TOKEN_BUDGET}
_SENTENCE = re.compile(r"(?<=[.!?])[ \t]+|\n+")


@dataclass(frozen=True)
class Site:
    """An integer literal a name is bound to, on one line."""

    name: str
    value: int
    node: ast.Constant


def int_sites(source: str) -> list[Site]:
    """Integer constants of the module, its classes and their ``__init__`` (``self.x = 3``)."""
    tree, out = ast.parse(source), []

    def add(target, value):
        name = target.id if isinstance(target, ast.Name) else (
            target.attr if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == "self" else None)
        if (name and isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0
                and value.lineno == value.end_lineno):
            out.append(Site(name, value.value, value))

    def assignments(body):
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                add(node.targets[0], node.value)

    assignments(tree.body)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        assignments(cls.body)
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"):
            assignments(fn.body)
    return out


def neighbours(name: str, value: int) -> list[int]:
    """Values a mutation may set: twice, half, one more and one less, within the caps."""
    cap = CAPS.get(name, max(4 * value, 8))
    out = [2 * value, value // 2, value + 1, value - 1]
    return sorted({v for v in out if 0 <= v <= cap and v != value and (v > 0 or value == 1)})


def mutate_constant(source: str, rng: random.Random, exclude: tuple[str, ...] = ()) -> Edit:
    """One integer constant set to a neighbouring value (tag ``set_<name>_<value>``); ``exclude``:
    tags already in the lineage."""
    options = [(s, v, f"set_{s.name}_{v}") for s in int_sites(source) for v in neighbours(s.name, s.value)]
    options = [o for o in options if o[2] not in exclude]
    if not options:
        raise NotApplicable("no integer constant left to change")
    site, value, tag = rng.choice(options)
    return Edit(set_literal(source, site.node, value, tag), tag)


def set_constant(source: str, tag: str) -> Edit:
    """Re-apply a ``set_<name>_<value>`` mutation of another harness to ``source``."""
    m = re.fullmatch(r"set_(\w+)_(\d+)", tag)
    sites = [s for s in int_sites(source) if m and s.name == m[1]]
    if not sites or sites[-1].value == int(m[2]):
        raise NotApplicable(f"{tag} does not apply to this harness")
    return Edit(set_literal(source, sites[-1].node, int(m[2]), tag), tag)


def drop_sentence(source: str, rng: random.Random, marker: str) -> Edit:
    """One sentence removed from a plain prose literal of two or more (tag ``drop_<line>_<n>``)."""
    options = [(node, parts, i) for node, parts in _sentences(source, marker) for i in range(len(parts))
               if marker not in parts[i]]
    if not options:
        raise NotApplicable("no prompt literal with a sentence to drop")
    return _drop(source, *rng.choice(options))


def drop_sentence_at(source: str, tag: str, marker: str) -> Edit:
    """Re-apply a ``drop_<line>_<n>`` mutation to the source it was drawn on (the line numbers are
    that source's), e.g. to rebuild a found harness from its lineage."""
    m = re.fullmatch(r"drop_(\d+)_(\d+)", tag)
    for node, parts in _sentences(source, marker) if m else []:
        i = int(m[2])
        if node.lineno == int(m[1]) and i < len(parts) and marker not in parts[i]:
            return _drop(source, node, parts, i)
    raise NotApplicable(f"{tag} does not apply to this harness")


def _sentences(source: str, marker: str) -> list[tuple[ast.Constant, list[str]]]:
    """The prose literals of two or more sentences, each with its sentences."""
    out = []
    for node, text in _prose_nodes(ast.parse(source)):
        if isinstance(node, ast.Constant):
            parts = [p for p in _SENTENCE.split(text) if p.strip()]
            if len(parts) > 1:
                out.append((node, parts))
    return out


def _drop(source: str, node: ast.Constant, parts: list[str], i: int) -> Edit:
    sep = "\n" if "\n" in node.value else " "
    new = sep.join(p for j, p in enumerate(parts) if j != i)
    tag = f"drop_{node.lineno}_{i}"
    lines = source.splitlines(keepends=True)
    first, last = lines[node.lineno - 1].encode(), lines[node.end_lineno - 1].encode()
    head, tail = first[:node.col_offset].decode(), last[node.end_col_offset:].decode()
    lines[node.lineno - 1:node.end_lineno] = [f"{head}{quote(new)}{tail}"]
    out = "".join(lines)
    if MARK + tag not in out:
        out = out.rstrip("\n") + f"\n{MARK}{tag}\n"
    return Edit(out, tag)
