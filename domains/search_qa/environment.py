"""The search tool: BM25 over the domain's corpus, one index per domain object.

Tool ``search`` with args ``query`` (str, required), ``top_k`` (int, clamped to [1, 10],
default 3) and ``max_chars`` (int, clamped to [1, 4000], default 800): each passage's text is cut
to its first ``max_chars`` characters (the title is never cut). Queries longer than 1000
characters are cut to 1000. Errors (unknown tool, bad or unknown args, a query with no text)
come back as an observation with ``error`` set, never as an exception.
"""
from __future__ import annotations

import re
import threading

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from domains.base import Environment, Observation
from harnesses.contract import Call
from whale.types import Example

TOP_K_RANGE = (1, 10)
MAX_CHARS_RANGE = (1, 4000)
DEFAULTS = {"top_k": 3, "max_chars": 800}
MAX_QUERY_CHARS = 1000
# question words carry no topic; without them "Where was X born?" scores on X and "born"
STOPWORDS = frozenset(STOPWORDS_EN) | {
    "who", "whom", "whose", "what", "where", "when", "which", "why", "how", "did", "does", "do",
    "were", "has", "have", "had", "its", "his", "her", "from", "s"}
_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case words (letters and digits) minus stopwords."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25Index:
    """An in-memory BM25 index over passages ``{"id", "title", "text"}`` (title and text indexed)."""

    def __init__(self, passages: list[dict]):
        if not passages:
            raise ValueError("cannot index an empty corpus")
        self.passages = passages
        self.bm25 = bm25s.BM25()
        self.bm25.index([tokenize(f"{p['title']} {p['text']}") for p in passages], show_progress=False)

    def search(self, query: str, k: int) -> list[dict]:
        """The ``k`` best passages with a positive score; ties go to the earlier corpus row."""
        ids = self.bm25.get_tokens_ids(tokenize(query))
        if not ids:
            return []
        scores = self.bm25.get_scores_from_ids(ids)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.passages[i] for i in order if scores[i] > 0]


class LazyIndex:
    """Builds the index on first use, once, even when episodes start from several threads."""

    def __init__(self, load_passages):
        self._load = load_passages
        self._index: BM25Index | None = None
        self._lock = threading.Lock()

    def get(self) -> BM25Index:
        with self._lock:
            if self._index is None:
                self._index = BM25Index(self._load())
            return self._index

    def reset(self) -> None:
        with self._lock:
            self._index = None


class SearchEnvironment(Environment):
    """One episode: the question is public, every search is recorded for the verifier."""

    def __init__(self, index: BM25Index, example: Example):
        self.index = index
        self.example = example
        self.searches: list[str] = []
        self.retrieved: list[list[str]] = []

    def reset(self) -> dict:
        self.searches, self.retrieved = [], []
        return {"question": self.example.public["question"]}

    def step(self, call: Call) -> Observation:
        if call.tool != "search":
            return _error(call.tool, f"unknown tool {call.tool!r}; the only tool is 'search'")
        args, problem = parse_args(call.args)
        if problem:
            return _error("search", problem)
        hits = self.index.search(args["query"], args["top_k"])
        self.searches.append(args["query"])
        self.retrieved.append([p["id"] for p in hits])
        passages = [{"title": p["title"], "text": p["text"][:args["max_chars"]]} for p in hits]
        return Observation({"tool": "search", "passages": passages, "error": None})

    def authored(self, call: Call, completion: str) -> str | None:
        """A query is the model's when at least one of its words is the model's (this turn) and the
        rest are the model's or the question's: the harness may add the question's words, not words
        of its own or of the passages (a bad call searches nothing)."""
        args, problem = parse_args(call.args) if call.tool == "search" else ({}, "not a search")
        if problem:
            return None
        words = set(_WORD.findall(call.args["query"].lower()))  # uncut: a cut word is still the model's
        mine = set(_WORD.findall(completion.lower()))
        if not words & mine:
            return "the query has no word of the model's text of this turn"
        extra = words - mine - set(_WORD.findall(self.example.public["question"].lower()))
        if extra:
            return f"query words {sorted(extra)[:5]} are neither in the model's text nor in the question"
        return None

    def final_state(self) -> dict:
        return {"searches": list(self.searches), "retrieved": [list(r) for r in self.retrieved]}


def parse_args(args: dict) -> tuple[dict, str | None]:
    """Checked, clamped search arguments, or an error message for the observation."""
    unknown = sorted(set(args) - {"query", *DEFAULTS})
    if unknown:
        return {}, f"unknown argument(s) {unknown}; search takes query, top_k, max_chars"
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {}, "query must be a non-empty string"
    out = {"query": query.strip()[:MAX_QUERY_CHARS]}
    for name, (lo, hi) in (("top_k", TOP_K_RANGE), ("max_chars", MAX_CHARS_RANGE)):
        value = args.get(name, DEFAULTS[name])
        if isinstance(value, bool) or not isinstance(value, int):
            return {}, f"{name} must be an integer, got {value!r}"
        out[name] = min(max(value, lo), hi)
    return out, None


def _error(tool: str, message: str) -> Observation:
    return Observation({"tool": tool, "passages": [], "error": f"{tool}: {message}"})
