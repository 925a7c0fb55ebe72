"""Real public formats: Search-R1 question parquet files and wiki-18 style JSONL corpora.

Questions: one row per question, the text in ``question`` (or ``extra_info.question``), the gold
aliases in ``golden_answers`` (or ``reward_model.ground_truth.target``), optionally ``id`` (or
``extra_info.index``) and ``data_source``. Corpus: one JSON object per line, ``{"id", "contents"}``
with ``contents`` = title, newline, text (wiki-18 quotes its titles; the quotes are dropped).
Bad rows are refused with the file and the row index (parquet, from 0) or line number (JSONL, from 1).
"""
from __future__ import annotations

import json
from pathlib import Path

from domains.base import jsonl_rows, write_examples
from whale.files import write_atomic
from whale.types import Example, check_splits

# Search-R1's multi-hop benchmarks; every other source is counted as single-hop.
MULTI_HOP_SOURCES = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")


def split_contents(contents: str) -> tuple[str, str]:
    """``(title, text)`` of a wiki-18 ``contents`` string."""
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text.strip()


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
    """Examples of ``split`` from a Search-R1 style parquet file."""
    import pyarrow.parquet as pq

    check_splits(split)
    path = Path(path)
    out, seen = [], set()
    for i, row in enumerate(pq.read_table(path).to_pylist()):
        try:
            ex = _example(row, i, split)
        except ValueError as e:
            raise ValueError(f"{path}: row {i}: {e}") from None
        if ex.id in seen:
            raise ValueError(f"{path}: row {i}: duplicate id {ex.id!r}")
        seen.add(ex.id)
        out.append(ex)
    return out


def _example(row: dict, i: int, split: str) -> Example:
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
    source = str(row.get("data_source") or "").lower()
    hops = 2 if any(s in source for s in MULTI_HOP_SOURCES) else 1
    return Example(id=f"search_qa-{split}-{key}", split=split, public={"question": question.strip()},
                   gold={"answers": [a.strip() for a in answers], "hops": hops})


def import_real(data_dir: str | Path, corpus_path: str | Path, question_paths: dict[str, str | Path]) -> None:
    """Install real data as the domain's data: ``corpus.jsonl`` plus one file per split.

    Splits must not share a question (Search-R1's released harness set is a subset of its
    training set; that leak is refused here).
    """
    out = Path(data_dir)
    splits = {split: load_questions(p, split) for split, p in question_paths.items()}
    owner: dict[str, str] = {}
    for split, examples in splits.items():
        for ex in examples:
            q = " ".join(ex.public["question"].lower().split())
            if owner.setdefault(q, split) != split:
                raise ValueError(f"question {ex.public['question']!r} is in both {owner[q]} and {split}")
    passages = load_corpus(corpus_path)
    write_corpus(out / "corpus.jsonl", [{"id": p["id"], "contents": f"{p['title']}\n{p['text']}"} for p in passages])
    for split, examples in splits.items():
        write_examples(out / f"{split}.jsonl", examples)
