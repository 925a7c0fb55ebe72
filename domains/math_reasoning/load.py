"""Real math data: rows with a problem and an integer answer, from Parquet or JSONL.

Two layouts are understood, row by row:
- DAPO-Math-17k (verl style): ``prompt`` is a list of chat messages whose user message holds
  the problem, ``reward_model`` is ``{"ground_truth": "34", ...}``. DAPO's own answer-format
  instructions around the problem ("... of the form Answer: $Answer ...", "Remember to put
  your answer on its own line after "Answer:"") are removed, because the harness, not the data,
  says how to answer.
- Flat: the problem text in ``problem``/``Problem``/``question``/``prompt`` (a string) and the
  answer in ``answer``/``Answer``, with ``id``/``ID`` when present (AIME: ``Maxwell-Jia/AIME_2024``,
  ``yentinglin/aime_2025``; most hand-made files).
A row without a problem or with a non-integer answer raises ValueError naming the file and the
line (JSONL, 1-based) or row (Parquet, 0-based). Without an id column a row's id is its 0-based
position in the file, the same for a Parquet file and its JSONL copy. Problems repeated with the
same text are kept once (the published DAPO-Math-17k repeats every problem many times).
"""
from __future__ import annotations

import re
from pathlib import Path

from domains.tables import table_rows
from whale.types import Example, check_splits

PROBLEM = ("problem", "Problem", "question", "prompt")
ANSWER = ("answer", "Answer")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DAPO_HEAD = re.compile(r"^\s*Solve the following math problem[^\n]*Answer:[^\n]*\n\s*", re.I)
_DAPO_TAIL = re.compile(r"\s*Remember to put your answer on its own line after \"?Answer:\"?\.?\s*$", re.I)


def load_rows(path: str | Path, split: str, dedupe: bool = True) -> list[Example]:
    """Examples of ``split`` from a ``.parquet`` or ``.jsonl`` file of math problems."""
    check_splits(split)
    path = Path(path)
    out, seen = [], set()
    for where, ordinal, row in table_rows(path):
        try:
            problem, answer, row_id = _parse(row)
        except ValueError as e:
            raise ValueError(f"{path}: {where}: {e}") from None
        key = " ".join(problem.split()).lower()
        if dedupe and key in seen:
            continue
        seen.add(key)
        ident = f"math-{split}-{path.stem}-{row_id if row_id is not None else ordinal}"
        out.append(Example(id=ident, split=split, public={"question": problem}, gold={"answer": answer}))
    ids = [ex.id for ex in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: example ids are not unique (duplicate id column values)")
    return out


def _parse(row) -> tuple[str, int, str | None]:
    if not isinstance(row, dict):
        raise ValueError(f"a row must be an object, got {type(row).__name__}")
    if "reward_model" in row:
        problem = _dapo_problem(row.get("prompt"))
        reward_model = row["reward_model"]
        if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
            raise ValueError("reward_model has no ground_truth")
        answer = reward_model["ground_truth"]
        info = row.get("extra_info")
        row_id = info.get("index") if isinstance(info, dict) else None
    else:
        problem = _first(row, PROBLEM)
        answer = _first(row, ANSWER)
        row_id = _first(row, ("id", "ID"))
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError(f"missing problem text; accepted: a text column {_names(PROBLEM)}, or DAPO's 'prompt' "
                         f"(chat messages) with 'reward_model.ground_truth'; this row has {_names(row)}")
    if answer is None:
        raise ValueError(f"missing answer; accepted: {_names(ANSWER)} or DAPO's 'reward_model.ground_truth'; "
                         f"this row has {_names(row)}")
    return problem.strip(), _integer(answer), None if row_id is None else str(row_id)


def _names(keys) -> str:
    return ", ".join(repr(k) for k in keys) or "no columns"


def _first(row: dict, keys: tuple[str, ...]):
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def _dapo_problem(prompt) -> str | None:
    if isinstance(prompt, str):
        return _strip_dapo(prompt)
    if not isinstance(prompt, list):
        return None
    users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    return _strip_dapo(users[0]) if users and isinstance(users[0], str) else None


def _strip_dapo(text: str) -> str:
    return _DAPO_TAIL.sub("", _DAPO_HEAD.sub("", text, count=1), count=1)


def _integer(value) -> int:
    if isinstance(value, bool):
        raise ValueError(f"answer {value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError(f"answer {value!r} is not an integer")
