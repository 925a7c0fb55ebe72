import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_paragraph_pasted_at_every_position_is_caught():
    page = "# Results\n\n" + "A run of the study at budget 640 on search QA, seeds 0 to 2. " * 4 + "\n"
    paragraph = "The table below is the afternoon's `whale compare` over its nine runs, all at one commit. " * 3
    broken = page.replace("", paragraph + "\n\n")  # what an empty search string does
    assert hooks().repeated_paragraph(page) is None
    first, again = hooks().repeated_paragraph(broken)
    assert broken.splitlines()[first - 1] == broken.splitlines()[again - 1]


def test_short_repeats_such_as_table_rows_or_headings_are_allowed():
    assert hooks().repeated_paragraph("| a | b |\n\nok\n\n| a | b |\n\nok\n") is None


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_no_docs_page_repeats_a_paragraph(page):
    assert hooks().repeated_paragraph(page.read_text()) is None


def test_the_build_fails_naming_file_and_line(tmp_path):
    source = tmp_path / "results.md"
    source.write_text("# Results\n\n" + ("x" * 250 + "\n\n") * 2)

    class Page:
        class file:
            src_path, abs_src_path = "results.md", str(source)

    with pytest.raises(ValueError, match=r"docs/results.md:5: repeats the paragraph of line 3"):
        hooks().on_page_markdown(source.read_text(), Page, None, None)
