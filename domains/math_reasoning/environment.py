"""The math environment: the question and one tool, ``python``, that runs model-written code."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from domains.base import Environment, Observation
from domains.math_reasoning.pytool import run_python
from harnesses.contract import Call
from harnesses.jail import JailSpec
from whale.types import Example


@dataclass(frozen=True)
class ToolLimits:
    """Limits of the python tool. A harness picks ``timeout_s`` per call, clamped to the max."""

    default_timeout_s: float = 5.0
    max_timeout_s: float = 10.0
    memory_mb: int = 512
    output_limit: int = 4096
    max_code_chars: int = 20000
    jail: JailSpec = JailSpec()


TOOL_ARGS = ("code", "timeout_s")
FENCE_LINE = re.compile(r"\s*```[\w+-]*\s*")


def describe(limits: ToolLimits) -> str:
    return (f"python(code: str, timeout_s: float = {limits.default_timeout_s:g}, at most "
            f"{limits.max_timeout_s:g}): runs the code (the first ```python block if fenced; a final "
            f"bare expression is printed; math is imported) with the standard library only, no files, no network, "
            f"{limits.memory_mb} MB; returns stdout+stderr (at most {limits.output_limit} chars), ok, timed_out")


class MathEnvironment(Environment):
    """One episode: shows the question, runs python calls, counts them for the record."""

    def __init__(self, example: Example, tool_limits: ToolLimits | dict | None = None):
        self.example = example
        if isinstance(tool_limits, dict):
            tool_limits = ToolLimits(**tool_limits)
        self.limits = tool_limits or ToolLimits()
        self.tool_calls = 0
        self.tool_errors = 0

    def reset(self) -> dict:
        self.tool_calls = 0
        self.tool_errors = 0
        return {"question": self.example.public["question"], "tools": {"python": describe(self.limits)}}

    def step(self, call: Call) -> Observation:
        """Run one call. Bad calls come back as ``{"error": ...}`` data; nothing is raised."""
        self.tool_calls += 1
        problem = self._check(call)
        if problem:
            self.tool_errors += 1
            return Observation({"error": problem})
        timeout = min(float(call.args.get("timeout_s", self.limits.default_timeout_s)), self.limits.max_timeout_s)
        result = run_python(call.args["code"], timeout, self.limits.memory_mb, self.limits.output_limit,
                            self.limits.jail)
        return Observation({"tool": "python", **result})

    def authored(self, call: Call, completion: str) -> str | None:
        """Every line of the code must be the model's, from this turn's text: the harness may cut
        the program out of a fence, not add a line of its own (a bad call runs nothing). Fence
        lines are markup the tool never runs: a harness may forward its own opening fence."""
        if self._check(call):
            return None
        text = " ".join(completion.split())
        for n, line in enumerate(call.args["code"].splitlines(), 1):
            if line.strip() and not FENCE_LINE.fullmatch(line) and " ".join(line.split()) not in text:
                return f"line {n} of the code is not in the model's text of this turn: {line.strip()[:80]!r}"
        return None

    def _check(self, call: Call) -> str | None:
        if getattr(call, "tool", None) != "python":
            return f"unknown tool {getattr(call, 'tool', None)!r}; the only tool is 'python'"
        args = call.args if isinstance(call.args, dict) else None
        if args is None:
            return "python arguments must be an object with 'code' (and optionally 'timeout_s')"
        extra = sorted(set(args) - set(TOOL_ARGS), key=str)
        if extra:
            return f"unknown python argument(s) {extra}; allowed: {list(TOOL_ARGS)}"
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            return "python needs 'code': a non-empty string"
        if len(code) > self.limits.max_code_chars:
            return f"code is {len(code)} characters; the limit is {self.limits.max_code_chars}"
        timeout = args.get("timeout_s", self.limits.default_timeout_s)
        number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        if not number or not math.isfinite(timeout) or timeout <= 0:
            return f"timeout_s must be a positive number of seconds, got {timeout!r}"
        return None

    def final_state(self) -> dict:
        return {"tool_calls": self.tool_calls, "tool_errors": self.tool_errors}
