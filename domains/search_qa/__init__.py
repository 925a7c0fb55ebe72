"""Search QA: answer factual questions by searching an encyclopaedia with BM25.

Data lives in ``data/search_qa/``: ``corpus.jsonl`` (``{"id", "contents"}``, shared by every
split) and ``weight/harness/test.jsonl``. ``prepare`` writes the synthetic encyclopaedia;
``load.import_real`` installs Search-R1 parquet questions and a wiki-18 style corpus instead.
"""
from __future__ import annotations

from pathlib import Path

from domains.base import Domain, Environment, write_examples
from domains.search_qa.environment import LazyIndex, SearchEnvironment
from domains.search_qa.generate import build_encyclopaedia
from domains.search_qa.load import load_corpus, write_corpus
from domains.search_qa.verify import mentions, verify
from whale.types import Example, Verdict


class SearchQA(Domain):
    name = "search_qa"

    def __init__(self, data_dir: str | Path = "data", judge: bool = False, judge_model: str = "claude-haiku-4-5"):
        super().__init__(data_dir)
        # the domain object is long-lived: the index is built once and serves every episode
        self.index = LazyIndex(self._load_passages)
        self.judge = None
        if judge:  # optional, never the default: verdicts cached beside the data
            from domains.search_qa.judge import LLMJudge

            self.judge = LLMJudge(model=judge_model, cache_path=self.data_dir / "judge_cache.jsonl")

    @property
    def corpus_path(self) -> Path:
        return self.data_dir / "corpus.jsonl"

    def _load_passages(self) -> list[dict]:
        if not self.corpus_path.exists():
            raise FileNotFoundError(f"{self.corpus_path} is missing: run `whale prepare --domain {self.name}`")
        return load_corpus(self.corpus_path)

    def generate(self, sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
        return build_encyclopaedia(sizes, seed)[1]

    def prepare(self, sizes: dict[str, int], seed: int) -> None:
        """Write the shared corpus, then the splits (each file atomically)."""
        corpus, splits = build_encyclopaedia(sizes, seed)
        write_corpus(self.corpus_path, corpus)
        for split, examples in splits.items():
            write_examples(self.data_dir / f"{split}.jsonl", examples)
        self.index.reset()

    def environment(self, example: Example) -> Environment:
        return SearchEnvironment(self.index.get(), example)

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        if self.judge is not None:
            return self.judge.verify(example, messages, state)
        return verify(example.gold, messages, state)

    def mentions_gold(self, example: Example):
        return mentions(example.gold["answers"])


def make_domain(data_dir: str | Path = "data", **options) -> SearchQA:
    return SearchQA(data_dir, **options)
