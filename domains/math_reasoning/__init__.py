"""math_reasoning: integer-answer problems, a sandboxed Python tool, a strict ``\\boxed{}`` verifier."""
from __future__ import annotations

from pathlib import Path

from domains.base import Domain, write_examples
from domains.math_reasoning import generate as _generate
from domains.math_reasoning.environment import MathEnvironment, ToolLimits
from domains.math_reasoning.load import load_rows
from domains.math_reasoning.verify import mentions
from domains.math_reasoning.verify import verify as _verify
from harnesses.jail import JailSpec
from whale.types import Example, Verdict, check_splits

__all__ = ["MathDomain", "MathEnvironment", "ToolLimits", "load_rows", "make_domain"]


class MathDomain(Domain):
    name = "math_reasoning"

    def __init__(self, data_dir: str | Path = "data", tool_limits: ToolLimits | None = None):
        super().__init__(data_dir)
        self.tool_limits = tool_limits or ToolLimits()

    def generate(self, sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
        return _generate.generate(sizes, seed)

    def import_files(self, files: dict[str, str | Path]) -> dict[str, int]:
        """Write splits from real data files (``{split: path}``), made disjoint, and count them.

        A problem found in a held-out split is dropped from the others (test beats harness beats
        weight), since the published pools overlap (the reference drew D_harness from D_weight).
        """
        check_splits(*files)
        loaded = {split: load_rows(files[split], split) for split in _generate.DRAW_ORDER if split in files}
        seen: set[str] = set()
        counts = {}
        for split, examples in loaded.items():
            kept = [ex for ex in examples if _generate.normalise(ex.public["question"]) not in seen]
            seen.update(_generate.normalise(ex.public["question"]) for ex in kept)
            write_examples(self.data_dir / f"{split}.jsonl", kept)
            counts[split] = len(kept)
        return counts

    def environment(self, example: Example) -> MathEnvironment:
        return MathEnvironment(example, self.tool_limits)

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        return _verify(messages, int(example.gold["answer"]))

    def mentions_gold(self, example: Example):
        return mentions(int(example.gold["answer"]))


def make_domain(data_dir: str | Path = "data", jail: str = "bwrap", max_processes: int = 32) -> MathDomain:
    return MathDomain(data_dir, ToolLimits(jail=JailSpec(jail, max_processes)))
