"""What every domain provides. Domains are trusted code; harnesses never import them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from domains.leaks import leak
from domains.tables import DRAW_ORDER, disjoint, jsonl_rows
from harnesses.contract import Call
from whale.files import write_atomic
from whale.types import Example, Verdict, check_splits


@dataclass
class Observation:
    """What the environment returns for a tool call. ``data`` is shown to the harness."""

    data: dict
    done: bool = False


class Environment:
    """One episode's world: tools, state, and the final state the verifier reads."""

    def reset(self) -> dict:
        raise NotImplementedError

    def step(self, call: Call) -> Observation:
        raise NotImplementedError

    def authored(self, call: Call, completion: str) -> str | None:
        """Why ``call`` is not the model's action (None when it is). ``completion`` is the text the
        model wrote this turn, without the harness's prefix. By default every string argument,
        whitespace collapsed, must appear in it: the harness may cut an argument out of the
        model's text, not write one. Domains relax this where normalising is part of the tool
        (a chess move in another notation)."""
        have = _collapse(completion)
        for name, value in string_args(call.args):
            if _collapse(value) not in have:
                return f"argument {name!r} of {call.tool} is not in the model's text of this turn"
        return None

    def final_state(self) -> dict:
        """Trusted facts about the episode for the verifier (moves played, tool results)."""
        return {}

    def close(self) -> None:
        pass


class Domain:
    """A problem family: splits of examples, an environment per example, a binary verifier."""

    name: str = ""

    def __init__(self, data_dir: str | Path = "data"):
        self.data_dir = Path(data_dir) / self.name

    def examples(self, split: str) -> list[Example]:
        """The split written by this domain's generator (``data/<domain>/<split>.jsonl``)."""
        check_splits(split)
        path = self.data_dir / f"{split}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `whale prepare --domain {self.name}`")
        return read_examples(path, split)

    def generate(self, sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
        """Deterministic synthetic splits, disjoint by construction (sizes keyed by split)."""
        raise NotImplementedError

    def prepare(self, sizes: dict[str, int], seed: int) -> None:
        """Generate the splits and write them to ``data/<domain>/<split>.jsonl``."""
        for split, examples in self.generate(sizes, seed).items():
            write_examples(self.data_dir / f"{split}.jsonl", examples)

    def load_file(self, path: str | Path, split: str) -> list[Example]:
        """Examples of ``split`` from one real data file (the domain's public format)."""
        raise NotImplementedError(f"{self.name} reads no real data files")

    def identity(self, example: Example) -> str:
        """What makes two examples the same problem, for keeping splits disjoint."""
        raise NotImplementedError

    def import_files(self, files: dict[str, str | Path]) -> dict[str, int]:
        """Write splits from real files (``{split: path}``) and count them. Splits already written
        (generated) are kept beside them, and every split is made disjoint from the others: a
        problem two splits share stays only in the more held-out one (``DRAW_ORDER``), since
        published pools overlap, and a generated problem never sits beside its real twin."""
        check_splits(*files)
        splits = {s: self.load_file(files[s], s) if s in files else read_examples(self.data_dir / f"{s}.jsonl", s)
                  for s in DRAW_ORDER if s in files or (self.data_dir / f"{s}.jsonl").exists()}
        kept = disjoint(splits, self.identity)
        for split, examples in kept.items():
            write_examples(self.data_dir / f"{split}.jsonl", examples)
        return {s: len(kept[s]) for s in DRAW_ORDER if s in files}

    def environment(self, example: Example) -> Environment:
        raise NotImplementedError

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        raise NotImplementedError

    def leak(self, example: Example, events: list[tuple[str, str]]) -> str | None:
        """Why a rewarded episode leaked the gold answer (None when it did not): by default the first
        event that mentions it (``mentions_gold``) is harness-written."""
        mentions = self.mentions_gold(example)
        return None if mentions is None else leak(events, mentions)

    def mentions_gold(self, example: Example):
        """A test ``text -> bool`` for the default leak check (``domains/leaks.py``), or None
        where the domain has its own ``leak`` (chess: the legal-move list always holds the answer)."""
        return None


def _collapse(text: str) -> str:
    return " ".join(text.split())


def string_args(args, name: str = "") -> list[tuple[str, str]]:
    """``(name, value)`` of every string inside tool arguments (nested lists and objects too)."""
    if isinstance(args, str):
        return [(name, args)]
    if isinstance(args, dict):
        return [pair for k, v in args.items() for pair in string_args(v, f"{name}.{k}" if name else str(k))]
    if isinstance(args, list | tuple):
        return [pair for i, v in enumerate(args) for pair in string_args(v, f"{name}[{i}]")]
    return []


def last_assistant(messages: list[dict]) -> str:
    """The content of the last assistant message ('' when the model never spoke)."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            return m["content"]
    return ""


def harness_prefix_len(messages: list[dict]) -> int:
    """Characters at the start of the last assistant message that the harness wrote (its prefix):
    an answer must start after them, so that only the model's tokens can earn a reward."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            return len(m.get("prefix", ""))
    return 0


def write_examples(path: Path, examples: list[Example]) -> None:
    """Write a split atomically: a crash never leaves half a file behind."""
    write_atomic(path, "".join(json.dumps({"id": ex.id, "public": ex.public, "gold": ex.gold}, sort_keys=True) + "\n"
                               for ex in examples))


def read_examples(path: Path, split: str) -> list[Example]:
    out = []
    for line_no, row in jsonl_rows(path):
        try:
            out.append(Example(id=str(row["id"]), split=split, public=row["public"], gold=row["gold"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}:{line_no}: bad example row ({e})") from None
    return out


def check_sizes(sizes: dict[str, int]) -> None:
    """Split sizes must name known splits and be non-negative ints."""
    check_splits(*sizes)
    for split, n in sizes.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"size of split {split!r} must be a non-negative int, got {n!r}")
