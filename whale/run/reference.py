"""The configuration reference: every key of ``params.yaml`` with its type, default, range and
description, generated from the typed settings (``Settings``: types, ranges, accepted values) and
from params.yaml itself (defaults, and the comment above each key as its description).

params.yaml is the one configuration file, so its comments are the one place a setting is
described; ``missing_descriptions`` lists the keys that have none (a test keeps it empty), and the
docs site renders ``markdown()`` into its configuration page at build time.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel

from whale.run.settings import DEFAULT_PATH, Settings


@dataclass(frozen=True)
class Key:
    path: str  # dotted, e.g. backend.vllm.dtype
    type: str
    default: str
    range: str
    description: str


def _comment_above(lines: list[str], line: int) -> str:
    """The comment block directly above line ``line`` (0-based), or the comment at its end."""
    out = []
    i = line - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i].strip().lstrip("#").strip())
        i -= 1
    text = " ".join(reversed(out))
    if not text and "#" in lines[line]:
        text = lines[line].split("#", 1)[1].strip()
    return text


def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" if a is not None else "null" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (list, tuple):
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "mapping"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _range(field) -> str:
    parts = []
    for m in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(m, attr, None) is not None:
                parts.append(f"{sign} {getattr(m, attr)}")
        if getattr(m, "min_length", None):
            parts.append(f"length >= {m.min_length}")
    return ", ".join(parts)


def _section(annotation) -> type[BaseModel] | None:
    """The settings section a field holds: itself, or the values of a mapping of sections."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value
    return None


def keys(path: str | Path = DEFAULT_PATH) -> list[Key]:
    """Every key params.yaml sets at the top level (profiles and per-domain overlays aside)."""
    text = Path(path).read_text()
    lines, root = text.splitlines(), yaml.compose(text)
    out: list[Key] = []
    _walk(Settings, root, "", lines, out)
    return out


SKIP = {"profiles", "per_domain", "domain"}  # overlays are documented with profiles, domain is set by the run


def _walk(model: type[BaseModel], node, prefix: str, lines: list[str], out: list[Key]) -> None:
    entries = {k.value: (k, v) for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}
    for name, field in model.model_fields.items():
        dotted = f"{prefix}{name}"
        if dotted in SKIP or name not in entries:
            continue
        key_node, value_node = entries[name]
        section = _section(field.annotation)
        description = _comment_above(lines, key_node.start_mark.line)
        if section is not None and isinstance(value_node, yaml.MappingNode) and value_node.value and (
                typing.get_origin(field.annotation) is not dict):
            out.append(Key(dotted, "section", "", "", description))
            _walk(section, value_node, dotted + ".", lines, out)
            continue
        if section is not None and typing.get_origin(field.annotation) is dict:
            value = f"{{{', '.join(k.value for k, _ in value_node.value)}}}" if value_node.value else "{}"
            out.append(Key(dotted, f"mapping of domain to {section.__name__}", value, "", description))
            continue
        default = yaml.safe_load(yaml.serialize(value_node)) if value_node is not None else None
        out.append(Key(dotted, _type_name(field.annotation), _show(default), _range(field), description))


def _show(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def missing_descriptions(path: str | Path = DEFAULT_PATH) -> list[str]:
    return [k.path for k in keys(path) if not k.description]


def markdown(path: str | Path = DEFAULT_PATH) -> str:
    """The reference as Markdown tables: the top-level keys, then one table per section."""
    header = ["| key | type | default | range | description |", "|---|---|---|---|---|"]
    out, table = [], None
    for k in keys(path):
        top = k.path.split(".")[0] if "." in k.path or k.type == "section" else "top level"
        if table != top:
            table = top
            out += ["", f"### `{top}`" if top != "top level" else "### Top level", ""]
            if k.type == "section":
                out += ([k.description, ""] if k.description else []) + header
                continue
            out += header
        default = f"`{_cell(k.default)}`" if k.type != "section" else ""
        out.append(f"| `{k.path}` | {k.type} | {default} | {k.range} | {_cell(k.description)} |")
    return "\n".join(out).strip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
