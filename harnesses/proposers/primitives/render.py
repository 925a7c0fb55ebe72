"""Layer bodies written as ordinary Python classes, rendered into the text a layer appends.

The offline proposer's layers live in ``harnesses.proposers.primitives.layers`` as classes that
ruff lints and Python imports, each subclassing a stand-in ``Harness``. Rendering one takes the
source of its class body (after the bodies of the module classes it derives from, base first)
and, token by token, puts in what the primitive knows only when it edits a harness:

- a **slot** (an upper-case name of ``layers.slots``) becomes the Python text of its value, and a
  comment that is just ``# SLOT`` becomes ``# <value>``;
- a **rename** changes an identifier (an attribute, a method, a counter) so that two layers built
  from one class keep apart in one harness;
- a statement ``x = f(a, b)`` whose ``f`` is a module function marked ``@inline`` becomes the body
  of ``f`` up to its ``return x`` (a harness is one self-contained module).

The rendered text is what ``edit.add_layer`` appends under ``class Harness(Harness):``; the names
it uses that a harness module must import (``re``, ``dataclasses``, ``Prompt``, ``Call``,
``Finish``) are read off it, so a layer cannot forget one.
"""
from __future__ import annotations

import ast
import functools
import importlib
import io
import textwrap
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SLOTS_MODULE = "harnesses.proposers.primitives.layers.slots"


def inline(fn):
    """Mark a function whose body replaces ``x = fn(...)`` in a rendered layer (see module doc)."""
    return fn


@dataclass(frozen=True)
class _Module:
    path: str
    lines: list[str]
    tokens: list[tokenize.TokenInfo]
    slots: frozenset[str]
    classes: dict[str, ast.ClassDef]
    inlined: dict[str, ast.FunctionDef]


@functools.cache
def _module(name: str) -> _Module:
    module = importlib.import_module(name)
    text = Path(module.__file__).read_text()
    tree = ast.parse(text)
    slots = {name for name in vars(importlib.import_module(SLOTS_MODULE)) if name.isupper()}
    inlined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
               and any(isinstance(d, ast.Name) and d.id == "inline" for d in n.decorator_list)}
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    return _Module(module.__file__, text.splitlines(), tokens, frozenset(slots), classes, inlined)


def render(cls: type, values: Mapping[str, object] | None = None,
           renames: Mapping[str, str] | None = None) -> str:
    """The body text of layer class ``cls`` (unindented, bases first), slots filled with
    ``values`` (Python text, or ints) and identifiers renamed by ``renames``."""
    values, renames = dict(values or {}), dict(renames or {})
    mod = _module(cls.__module__)
    chain, node = [], mod.classes.get(cls.__name__)
    if node is None:
        raise ValueError(f"{cls.__qualname__} is not a top-level class of {cls.__module__}")
    while node is not None:
        chain.insert(0, node)
        base = node.bases[0] if len(node.bases) == 1 else None
        node = mod.classes.get(base.id) if isinstance(base, ast.Name) else None
    used: set[str] = set()
    text = "\n\n".join(_body(mod, part, values, renames, used) for part in chain)
    unused = sorted((set(values) | set(renames)) - used)
    if unused:
        raise ValueError(f"{cls.__name__} has no slot or name {', '.join(unused)}")
    return text


def _body(mod: _Module, cls: ast.ClassDef, values: dict, renames: dict, used: set[str]) -> str:
    first, last = cls.lineno + 1, cls.end_lineno  # comments above the first statement included
    if _docstring(cls):  # for readers of the layer module, not part of the layer
        first = cls.body[0].end_lineno + 1
    inlines = _inline_statements(mod, cls)
    skipped = {row for start, end, _ in inlines for row in range(start, end + 1)}
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for tok in mod.tokens:
        row = tok.start[0]
        if not first <= row <= last or row in skipped:
            continue
        text = _replacement(tok, mod, values, renames, used, row)
        if text is not None:
            edits.setdefault(row, []).append((tok.start[1], tok.end[1], text))
    rows = {}
    for row in range(first, last + 1):
        line = mod.lines[row - 1]
        for start, end, text in sorted(edits.get(row, ()), reverse=True):
            line = line[:start] + text + line[end:]
        rows[row] = [line]
    for start, end, replacement in inlines:
        rows[start] = replacement
        for row in range(start + 1, end + 1):
            rows[row] = []
    lines = [line for row in range(first, last + 1) for line in rows[row]]
    return textwrap.dedent("\n".join(lines)).strip("\n")


def _replacement(tok, mod: _Module, values: dict, renames: dict, used: set[str], row: int) -> str | None:
    if tok.type == tokenize.NAME and tok.string in mod.slots:
        if tok.string not in values:
            raise ValueError(f"{mod.path}:{row}: slot {tok.string} has no value")
        used.add(tok.string)
        return str(values[tok.string])
    if tok.type == tokenize.NAME and tok.string in renames:
        used.add(tok.string)
        return renames[tok.string]
    if tok.type == tokenize.COMMENT and tok.string[2:] in mod.slots and tok.string.startswith("# "):
        slot = tok.string[2:]
        if slot not in values:
            raise ValueError(f"{mod.path}:{row}: slot {slot} has no value")
        used.add(slot)
        return f"# {values[slot]}"
    return None


def _inline_statements(mod: _Module, cls: ast.ClassDef) -> list[tuple[int, int, list[str]]]:
    """(first row, last row, replacement lines) of each ``x = f(...)`` with ``f`` inlined."""
    out = []
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id in mod.inlined):
            continue
        fn = mod.inlined[node.value.func.id]
        target = node.targets[0]
        ret = fn.body[-1]
        params = [a.arg for a in fn.args.args]
        args = [a.id if isinstance(a, ast.Name) else None for a in node.value.args]
        if (args != params or len(node.targets) != 1 or not isinstance(target, ast.Name)
                or not isinstance(ret, ast.Return) or not isinstance(ret.value, ast.Name)
                or ret.value.id != target.id):
            raise ValueError(f"{mod.path}:{node.lineno}: an inlined call must read "
                             f"`{ast.unparse(target)} = {fn.name}({', '.join(params)})` and "
                             f"{fn.name} end with `return {ast.unparse(target)}`")
        # from the line after the signature (or the docstring): comments above the first statement stay
        signature_end = max([fn.lineno] + [a.end_lineno for a in fn.args.args])
        start = (fn.body[0].end_lineno if _docstring(fn) else signature_end) + 1
        body = "\n".join(mod.lines[start - 1:ret.lineno - 1]).strip("\n")
        indent = " " * node.col_offset
        out.append((node.lineno, node.end_lineno,
                    textwrap.indent(textwrap.dedent(body), indent).splitlines()))
    return out


def _docstring(node: ast.ClassDef | ast.FunctionDef) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
