"""mkdocs hooks: pages take generated and included content, so that each fact has one source.

``<!-- generate: configuration -->`` becomes the configuration reference (whale/run/reference.py),
``<!-- generate: schema -->`` the store's tables (whale/store), and ``<!-- include: PATH -->`` the
Markdown file at PATH (relative to the project root), its headings one level down.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- (include|generate): ([\w./-]+) -->")


def _generate(what: str) -> str:
    sys.path.insert(0, str(ROOT))
    if what == "configuration":
        from whale.run.reference import markdown

        return markdown(ROOT / "params.yaml")
    if what == "schema":
        from whale.store import SCHEMA

        return "```sql\n" + SCHEMA.strip() + "\n```\n"
    raise ValueError(f"docs: nothing generates {what!r}")


def _include(path: str) -> str:
    text = (ROOT / path).read_text()
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]  # the page has its own title
    return "\n".join("#" + line if line.startswith("#") else line for line in lines) + "\n"


def on_page_markdown(markdown, page, config, files):
    return MARK.sub(lambda m: _include(m[2]) if m[1] == "include" else _generate(m[2]), markdown)
