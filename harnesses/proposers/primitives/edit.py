"""Source edits the offline proposer makes on harness modules, located on the syntax tree.

Three kinds, each leaving an ordinary module a person can read:
- a **layer**: a commented ``class Harness(Harness)`` appended to the module. It rebinds the name
  to a subclass of the previous harness, so the new behaviour wraps the old one through
  ``super()`` (no dunder access needed) and the layers of a lineage read top to bottom;
- a **class constant** (``max_turns``, ``token_budget``) changed where it is defined;
- a **prompt sentence** appended to a prose string literal as an implicitly concatenated
  literal, which changes string constants only (what prompt-only mode allows).
Every edit marks itself with a ``# offline proposer: <tag>`` comment; ``applied_tags`` reads them.
"""
from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize

from harnesses.contract import BaseHarness

MARK = "# offline proposer: "
LAYER_MARK = "# --- offline proposer: "
# Names a layer may use and the import that binds each when the module lacks it.
IMPORTS = {
    "re": "import re",
    "dataclasses": "import dataclasses",
    "Prompt": "from harnesses.contract import Prompt",
    "Call": "from harnesses.contract import Call",
    "Finish": "from harnesses.contract import Finish",
}
_TAG = re.compile(r"#(?: ---)? offline proposer: ([A-Za-z0-9_.+-]+)")


class NotApplicable(Exception):
    """The primitive has nothing to change in this harness (the edit would be a no-op)."""


def quote(text: str) -> str:
    """A Python literal for ``text``, double-quoted where that needs no escaping."""
    r = repr(text)
    if r[0] == "'" and '"' not in text:
        r = '"' + r[1:-1] + '"'
    return r


def raw(pattern: str) -> str:
    """A raw-string literal for a regular expression (readable backslashes)."""
    if '"' in pattern or pattern.endswith("\\"):
        return quote(pattern)
    return 'r"' + pattern + '"'


def applied_tags(source: str) -> list[str]:
    """Tags of the offline edits already in ``source``, in order."""
    return _TAG.findall(source)


def module_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level of a module (imports, assignments, defs, classes)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def add_layer(source: str, tag: str, hypothesis: str, body: str) -> str:
    """``source`` followed by a commented subclass layer; ``body`` is the class body (unindented).
    The imports the body's names need (``IMPORTS``) and the module lacks come before it."""
    missing = names_read(body) - module_names(ast.parse(source))
    imports = [line for name, line in IMPORTS.items() if name in missing]
    header = textwrap.wrap(f"{tag}: {hypothesis}", 96, initial_indent=LAYER_MARK,
                           subsequent_indent="#     ")
    parts = [source.rstrip("\n"), "", "", *header, *imports, "class Harness(Harness):",
             textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")]
    return "\n".join(parts) + "\n"


def names_read(body: str) -> set[str]:
    """The names a class body reads (its methods' globals among them)."""
    tree = ast.parse("class Layer:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    "))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


# --- class constants -------------------------------------------------------------------------

def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef)]


def _assigned(cls: ast.ClassDef, name: str) -> ast.AST | None:
    """The value expression of the last ``name = ...`` in a class body."""
    found = None
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            found = node.value
    return found


def _defining_value(tree: ast.Module, name: str) -> tuple[ast.AST | None, bool]:
    """The expression that gives the final ``Harness`` its ``name`` and whether it is inherited
    from the contract (True: no class in the module sets it)."""
    classes = _classes(tree)
    harnesses = [i for i, c in enumerate(classes) if c.name == "Harness"]
    if not harnesses:
        raise NotApplicable("the module defines no class Harness")
    i = harnesses[-1]
    while True:
        cls = classes[i]
        value = _assigned(cls, name)
        if value is not None:
            return value, False
        base = cls.bases[0] if cls.bases else None
        if not isinstance(base, ast.Name) or base.id == "BaseHarness":
            return None, True
        earlier = [j for j in range(i) if classes[j].name == base.id]
        if not earlier:
            raise NotApplicable(f"cannot follow base class {base.id!r} of {cls.name}")
        i = earlier[-1]


def class_constant(source: str, name: str) -> int:
    """The integer ``name`` (``max_turns``, ``token_budget``) the final Harness class carries."""
    tree = ast.parse(source)
    value, inherited = _defining_value(tree, name)
    if inherited:
        return getattr(BaseHarness, name)
    if isinstance(value, ast.Name):  # a module constant such as MAX_TURNS = 4
        consts = [n.value for n in tree.body if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        value = consts[-1] if consts else value
    try:
        result = ast.literal_eval(value)
    except ValueError:
        raise NotApplicable(f"{name} is not a literal in this harness") from None
    if not isinstance(result, int) or isinstance(result, bool):
        raise NotApplicable(f"{name} is not an int in this harness")
    return result


def set_class_constant(source: str, name: str, value: int, tag: str, hypothesis: str) -> str:
    """Change an int class constant where it is written, or add a one-line layer that sets it."""
    tree = ast.parse(source)
    node, inherited = _defining_value(tree, name)
    if not inherited and isinstance(node, ast.Constant) and node.lineno == node.end_lineno:
        return set_literal(source, node, value, tag)
    return add_layer(source, tag, hypothesis, f"{name} = {value}")


def set_literal(source: str, node: ast.Constant, value: int, tag: str) -> str:
    """``source`` with the one-line literal ``node`` replaced by ``value``, marked with ``tag``
    where the line has room for a comment."""
    lines = source.splitlines(keepends=True)
    line = lines[node.lineno - 1].encode()
    tail = line[node.end_col_offset:].decode().rstrip("\n")
    text = line[:node.col_offset].decode() + str(value) + tail
    if "#" not in tail and not tail.endswith("\\"):
        text += f"  {MARK}{tag}"
    lines[node.lineno - 1] = text + "\n"
    return "".join(lines)


# --- prompt sentences ------------------------------------------------------------------------

def _prose_nodes(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """String literals that are prompt text: (node, text), docstrings excluded.

    An f-string qualifies only when it ends with literal text, so a sentence appended after it
    merges into that text instead of adding a node (prompt-only mode compares the trees).
    """
    inside_fstring, docstrings = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstring.update(id(v) for v in node.values)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in inside_fstring and id(node) not in docstrings:
                out.append((node, node.value))
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[-1], ast.Constant):
            out.append((node, "".join(v.value for v in node.values if isinstance(v, ast.Constant))))
    out = [(n, t) for n, t in out if re.search(r"\s", t) and len(t) >= 20]
    return sorted(out, key=lambda nt: (nt[0].lineno, nt[0].col_offset))


def _start_scope(tree: ast.Module) -> set[int]:
    """Ids of the nodes the ``start`` hooks run: their bodies, the module functions they call
    (transitively) and the module constants any of those read."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
    todo = [fn for cls in _classes(tree) for fn in cls.body
            if isinstance(fn, ast.FunctionDef) and fn.name == "start"]
    inside, visited = set(), set()
    while todo:
        root = todo.pop()
        for node in ast.walk(root):
            inside.add(id(node))
            if isinstance(node, ast.Name) and node.id not in visited:
                visited.add(node.id)
                todo += [x for x in (functions.get(node.id), constants.get(node.id)) if x is not None]
    return inside


def instruction_literal(source: str, marker: str) -> tuple[ast.AST, str]:
    """The prompt literal that carries the instructions: preferably one the ``start`` hook shows
    (written in it or a module constant it reads), preferably one naming the answer format
    (``marker``), then the first in the file."""
    tree = ast.parse(source)
    nodes = _prose_nodes(tree)
    if not nodes:
        raise NotApplicable("no prompt text found in this harness")
    inside = _start_scope(tree)
    ranked = sorted(nodes, key=lambda nt: (id(nt[0]) not in inside, marker not in nt[1]))
    return ranked[0]


def append_sentence(source: str, marker: str, sentence: str, tag: str) -> str:
    """Append ``sentence`` to the instruction literal as one more implicitly concatenated piece,
    on a line of its own where brackets allow it (a one-line literal is wrapped in parentheses)."""
    node, text = instruction_literal(source, marker)
    if sentence.strip() in text:
        raise NotApplicable("the prompt already says this")
    lines = source.splitlines(keepends=True)
    first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
    head = last.encode()[:node.end_col_offset].decode()
    tail = last.encode()[node.end_col_offset:].decode().rstrip("\n")
    piece = quote(sentence)
    mark = "" if tail.rstrip().endswith("\\") else f"  {MARK}{tag}"
    if node.end_lineno > node.lineno and _bracket_depth(source, node.end_lineno, len(head)) > 0:
        indent = re.match(r"[ \t]*", last).group(0)
        lines[node.end_lineno - 1] = f"{head}\n{indent}{piece}{tail}{mark}\n"
    elif node.end_lineno > node.lineno:  # a triple-quoted literal outside brackets
        lines[node.end_lineno - 1] = f"{head} {piece}{tail}{mark}\n"
    else:
        start = first.encode()[:node.col_offset].decode()
        literal = first.encode()[node.col_offset:node.end_col_offset].decode()
        indent = re.match(r"[ \t]*", first).group(0)
        lines[node.lineno - 1] = (f"{start}(\n{indent}    {literal}\n{indent}    {piece}{mark}\n"
                                  f"{indent}){tail}\n")
    return "".join(lines)


def _bracket_depth(source: str, line: int, col: int) -> int:
    """How many brackets are open at (line, col): a newline there continues the expression."""
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.start >= (line, col):
            break
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
    return depth
