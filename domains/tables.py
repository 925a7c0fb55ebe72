"""Real data files as rows, and splits made disjoint: what every domain's loader shares.

Rows are numbered from 0 in file order whatever the format (blank JSONL lines are not rows), so an
example's id does not depend on whether its file was Parquet or JSONL; errors still name the place
a person would look: the Parquet row (from 0) or the JSONL line (from 1).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from whale.types import Example

# Held-out splits win a shared example: test beats harness beats weight.
DRAW_ORDER = ("test", "harness", "weight")
FORMATS = (".parquet", ".jsonl", ".ndjson")


def table_rows(path: str | Path) -> Iterator[tuple[str, int, object]]:
    """``(where, ordinal, row)`` of a ``.parquet`` or ``.jsonl`` file: ``where`` for errors
    ("row 3" / "line 4"), ``ordinal`` the row's 0-based position among the file's rows."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"row {i}", i, row
    elif suffix in (".jsonl", ".ndjson"):
        for i, (line_no, row) in enumerate(jsonl_rows(path)):
            yield f"line {line_no}", i, row
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use {', '.join(FORMATS)}")


def jsonl_rows(path: str | Path):
    """``(line number, parsed row)`` of a JSONL file, blank lines skipped; a bad line raises
    ``ValueError("path:line: not JSON (...)")``."""
    with Path(path).open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_no}: not JSON ({e.msg})") from None


def disjoint(splits: dict[str, list[Example]], key: Callable[[Example], str]) -> dict[str, list[Example]]:
    """The splits with every example whose ``key`` was already taken dropped: by a split earlier in
    ``DRAW_ORDER``, or by an earlier example of its own split."""
    seen: set[str] = set()
    out = {}
    for split in sorted(splits, key=DRAW_ORDER.index):
        kept = []
        for ex in splits[split]:
            k = key(ex)
            if k not in seen:
                seen.add(k)
                kept.append(ex)
        out[split] = kept
    return out


def relabel(ex: Example, split: str) -> Example:
    """``ex`` moved to ``split``: its id's ``-<old split>-`` part renamed with it."""
    return replace(ex, split=split, id=ex.id.replace(f"-{ex.split}-", f"-{split}-", 1))
