"""The ablation bench's variants: the found harness, it without each edit, the seed."""
from pathlib import Path

from bench.ablation import variants

ROOT = Path(__file__).resolve().parents[2]


def test_each_variant_drops_one_edit_of_the_lineage():
    found = variants("chess_puzzles", ["legal_choices", "annotated_moves"], [])
    assert list(found) == ["found: seed + legal_choices+annotated_moves", "without legal_choices",
                           "without annotated_moves", "seed h0"]
    assert found["seed h0"] == (ROOT / "harnesses/seeds/chess_puzzles.py").read_text()
    assert len(set(found.values())) == 4  # every edit changes the source
    # dropping the second edit leaves the first edit's harness as the offline proposer built it
    assert found["without annotated_moves"] == variants("chess_puzzles", ["legal_choices"], [])[
        "found: seed + legal_choices"]
