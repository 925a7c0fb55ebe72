"""mkdocs hooks: pages take generated and included content, so that each fact has one source.

``<!-- generate: configuration -->`` becomes the configuration reference (whale/run/reference.py),
``<!-- generate: schema -->`` the store's tables (whale/store), and ``<!-- include: PATH -->`` the
Markdown file at PATH (relative to the project root), its headings one level down. A page that
holds the same paragraph twice fails the build: a scripted edit that inserts text at every
position (an empty search string) would otherwise land a page thousands of times its size.
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


def paragraphs(markdown: str):
    """(first line number, text) of each run of non-blank lines."""
    start, lines = 0, []
    for number, line in enumerate(markdown.splitlines() + [""], 1):
        if line.strip():
            start = start or number
            lines.append(line)
        elif lines:
            yield start, "\n".join(lines)
            start, lines = 0, []


def repeated_paragraph(markdown: str, min_chars: int = 200) -> tuple[int, int] | None:
    """Line numbers (first, again) of the first paragraph of ``min_chars`` or more seen twice."""
    seen: dict[str, int] = {}
    for line, text in paragraphs(markdown):
        if len(text) >= min_chars:
            if text in seen:
                return seen[text], line
            seen[text] = line
    return None


def on_page_markdown(markdown, page, config, files):
    twice = repeated_paragraph(Path(page.file.abs_src_path).read_text())  # the file's own line numbers
    if twice:
        raise ValueError(f"docs/{page.file.src_path}:{twice[1]}: repeats the paragraph of line {twice[0]}")
    return MARK.sub(lambda m: _include(m[2]) if m[1] == "include" else _generate(m[2]), markdown)
