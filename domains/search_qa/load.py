"""Real public formats: Search-R1 questions (Parquet or JSONL) and wiki-18 style JSONL corpora.

Questions: one row per question, the text in ``question`` (or ``extra_info.question``), the gold
aliases in ``golden_answers`` (or ``reward_model.ground_truth.target``), optionally ``id`` (or
``extra_info.index``), ``data_source`` and ``hops`` (or ``extra_info.hops``, ``metadata.hops``).
Without ``hops`` a question counts as multi-hop when its ``data_source`` is one of Search-R1's
multi-hop benchmarks. Corpus: one JSON object per line, ``{"id", "contents"}`` with ``contents`` =
title, newline, text (wiki-18 quotes its titles, and repeats the title at the start of an article's
first passage, "Aaron Aaron (...)": both are undone). Bad rows are refused with the file and the
row (Parquet, from 0) or line (JSONL, from 1).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from domains.base import write_examples
from domains.tables import DRAW_ORDER, disjoint, jsonl_rows, relabel, table_rows
from whale.files import write_atomic
from whale.types import SPLITS, Example, check_splits

# Search-R1's multi-hop benchmarks; every other source is counted as single-hop.
MULTI_HOP_SOURCES = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")


def split_contents(contents: str) -> tuple[str, str]:
    """``(title, text)`` of a wiki-18 ``contents`` string."""
    title, _, text = contents.partition("\n")
    title, text = title.strip(), text.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    if title and text.startswith(f"{title} {title}"):
        text = text[len(title) + 1:]
    return title, text


def load_corpus(path: str | Path) -> list[dict]:
    """Passages ``{"id", "title", "text"}`` from a JSONL corpus."""
    path = Path(path)
    out, seen = [], set()
    for line_no, row in jsonl_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("contents"), str) or "id" not in row:
            raise ValueError(f"{path}:{line_no}: a corpus row needs 'id' and a string 'contents'")
        pid = str(row["id"])
        if pid in seen:
            raise ValueError(f"{path}:{line_no}: duplicate passage id {pid!r}")
        seen.add(pid)
        title, text = split_contents(row["contents"])
        out.append({"id": pid, "title": title, "text": text})
    if not out:
        raise ValueError(f"{path}: the corpus is empty")
    return out


def write_corpus(path: str | Path, rows: list[dict]) -> None:
    """Write ``{"id", "contents"}`` rows atomically (tmp file, then rename)."""
    write_atomic(path, "".join(json.dumps({"id": r["id"], "contents": r["contents"]}) + "\n" for r in rows))


def load_questions(path: str | Path, split: str) -> list[Example]:
    """Examples of ``split`` from a Search-R1 style Parquet or JSONL file."""
    check_splits(split)
    path = Path(path)
    out, seen = [], set()
    for where, ordinal, row in table_rows(path):
        try:
            ex = _example(row, ordinal, split)
        except ValueError as e:
            raise ValueError(f"{path}: {where}: {e}") from None
        if ex.id in seen:
            raise ValueError(f"{path}: {where}: duplicate id {ex.id!r}")
        seen.add(ex.id)
        out.append(ex)
    return out


def _example(row, i: int, split: str) -> Example:
    if not isinstance(row, dict):
        raise ValueError(f"a row must be an object, got {type(row).__name__}")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    question = row.get("question") or extra.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("no question text in 'question' or 'extra_info.question'")
    answers = row.get("golden_answers")
    if answers is None:
        target = ((row.get("reward_model") or {}).get("ground_truth") or {}).get("target")
        answers = [target] if isinstance(target, str) else target
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise ValueError("gold answers ('golden_answers' or 'reward_model.ground_truth.target') "
                         f"must be a non-empty list of non-empty strings, got {answers!r}")
    key = next((k for k in (row.get("id"), extra.get("index")) if k is not None), i)
    return Example(id=f"search_qa-{split}-{key}", split=split, public={"question": question.strip()},
                   gold={"answers": [a.strip() for a in answers], "hops": _hops(row, extra)})


def _hops(row: dict, extra: dict) -> int:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    given = next((h for h in (row.get("hops"), extra.get("hops"), meta.get("hops")) if h is not None), None)
    if given is None:
        source = str(row.get("data_source") or "").lower()
        return 2 if any(s in source for s in MULTI_HOP_SOURCES) else 1
    number = given.strip() if isinstance(given, str) else given
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"hops must be a positive integer, got {given!r}")
    return number


def import_real(data_dir: str | Path, corpus_path: str | Path, question_paths: dict[str, str | Path],
                sizes: dict[str, int] | None = None, seed: int = 0) -> dict[str, int]:
    """Install real data as the domain's data: ``corpus.jsonl`` plus one file per split; returns
    each split's count. Given ``sizes``, a split no file names is drawn (``sizes[split]``
    questions, seeded) from the weight file if there is one, else from the test file, so a test
    set alone is enough. A
    question two splits share stays only in the more held-out one (Search-R1's released harness
    set is a subset of its training set)."""
    splits = {split: load_questions(p, split) for split, p in question_paths.items()}
    if not splits:
        raise ValueError("search_qa needs at least one question file")
    pool = next(s for s in ("weight", "test", "harness") if s in splits)
    for split in [s for s in SPLITS if s not in splits and sizes is not None]:
        splits[split] = _draw(splits, pool, split, sizes.get(split, 0), seed)
    kept = disjoint(splits, lambda ex: " ".join(ex.public["question"].lower().split()))
    empty = [s for s in DRAW_ORDER if s in kept and not kept[s]]
    if empty:
        raise ValueError(f"search_qa split(s) {', '.join(empty)} would be empty; name a file for each or give "
                         "more questions")
    passages = load_corpus(corpus_path)
    out = Path(data_dir)
    write_corpus(out / "corpus.jsonl", [{"id": p["id"], "contents": f"{p['title']}\n{p['text']}"} for p in passages])
    for split, examples in kept.items():
        write_examples(out / f"{split}.jsonl", examples)
    return {split: len(examples) for split, examples in kept.items()}


def _draw(splits: dict[str, list[Example]], pool_name: str, split: str, n: int, seed: int) -> list[Example]:
    """``n`` questions moved out of ``splits[pool_name]`` into ``split``; at least as many stay in
    the pool as are drawn."""
    pool = splits[pool_name]
    if n < 1 or len(pool) < 2 * n:
        raise ValueError(f"search_qa has no {split} file, and its {pool_name} file ({len(pool)} questions) is too "
                         f"small to draw {n} from (needs at least {2 * n}); name one with --from {split}=PATH")
    picked = set(random.Random(f"{seed}:{split}").sample(range(len(pool)), n))
    splits[pool_name] = [ex for i, ex in enumerate(pool) if i not in picked]
    return [relabel(ex, split) for i, ex in enumerate(pool) if i in picked]
