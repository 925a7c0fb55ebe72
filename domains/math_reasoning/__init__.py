"""math_reasoning: integer-answer problems, a sandboxed Python tool, a strict ``\\boxed{}`` verifier."""
from __future__ import annotations

from pathlib import Path

from domains.base import Domain
from domains.math_reasoning import generate as _generate
from domains.math_reasoning.environment import MathEnvironment, ToolLimits
from domains.math_reasoning.load import load_rows
from domains.math_reasoning.verify import mentions
from domains.math_reasoning.verify import verify as _verify
from harnesses.jail import JailSpec
from whale.types import Example, Verdict

__all__ = ["MathDomain", "MathEnvironment", "ToolLimits", "load_rows", "make_domain"]


class MathDomain(Domain):
    name = "math_reasoning"

    def __init__(self, data_dir: str | Path = "data", tool_limits: ToolLimits | None = None):
        super().__init__(data_dir)
        self.tool_limits = tool_limits or ToolLimits()

    def generate(self, sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
        return _generate.generate(sizes, seed)

    def load_file(self, path: str | Path, split: str) -> list[Example]:
        return load_rows(path, split)

    def identity(self, example: Example) -> str:
        return _generate.normalise(example.public["question"])

    def environment(self, example: Example) -> MathEnvironment:
        return MathEnvironment(example, self.tool_limits)

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        return _verify(messages, int(example.gold["answer"]))

    def mentions_gold(self, example: Example):
        return mentions(int(example.gold["answer"]))


def make_domain(data_dir: str | Path = "data", jail: str = "bwrap", max_processes: int = 32) -> MathDomain:
    return MathDomain(data_dir, ToolLimits(jail=JailSpec(jail, max_processes)))
