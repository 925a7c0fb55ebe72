"""An optional LLM judge for search QA (off by default: the domain's verifier is normalised EM).

Claude reads the question, the gold aliases and the answer inside the last assistant turn's
innermost ``<answer>`` tags and replies with one word, CORRECT or INCORRECT. It accepts what EM
rejects for form only (aliases, qualifiers, a date or place that contains the gold, another
number form) and rejects what is really wrong (another entity, a hedged list, a passage dump).

- A missing answer tag scores 0 without a request.
- Verdicts are cached on disk by (model, question, answer, gold aliases) in a JSON-lines file,
  so judging a rollout again costs nothing and gives the same verdict.
- When the API keeps failing (``retries`` attempts with exponential backoff), the judge falls
  back to normalised EM for that answer and for every later one of this judge (no more waiting
  on a dead endpoint); fallback verdicts are marked and not cached.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import anthropic

from domains.search_qa.verify import normalize_answer, verify
from whale.clients.anthropic import ApiUnavailable, create_message, make_client
from whale.types import Example, Verdict

SYSTEM = """You grade answers to factual questions. Reply with exactly one word: CORRECT or INCORRECT.

CORRECT when the predicted answer names the same thing as one of the gold answers:
- an alias, abbreviation, translation or alternative spelling of the same entity;
- extra qualifiers that do not change the entity ("Paris, France" for "Paris");
- a more specific date or place that contains the gold one ("12 May 1990" for "1990");
- the same number in another form ("1,000", "one thousand", "1000");
- a self-correction that ends on the right answer.

INCORRECT when:
- it names a different entity, even a related one, or a different number;
- it lists several candidates or hedges between them;
- it dumps a passage or a long text instead of an answer;
- it does not commit to an answer ("unknown", "cannot tell")."""

EM_FALLBACK, CACHED, LLM, NO_ANSWER = "em_fallback", "cache", "llm", "no_answer"


class LLMJudge:
    """Judge extracted answers with Claude; ``verify`` has the domain verifier's signature."""

    def __init__(self, model: str = "claude-haiku-4-5", cache_path: str | Path | None = None,
                 client: anthropic.Anthropic | None = None, retries: int = 3,
                 backoff_base_s: float = 1.0, max_sleep_s: float = 30.0, timeout_s: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep):
        self.model, self.retries, self.timeout_s = model, retries, timeout_s
        self.backoff_base_s, self.max_sleep_s, self.sleep = backoff_base_s, max_sleep_s, sleep
        self._client = client
        self._ready: anthropic.Anthropic | None = None  # the client as configured for requests
        self.cache_path = Path(cache_path) if cache_path else None
        self.cache = _load(self.cache_path)
        self.down: str | None = None  # why the API was given up on, once it was

    def verify(self, example: Example, messages: list[dict], state: dict) -> Verdict:
        """The EM verdict's details plus the judge's reward (EM stays in details as ``em``)."""
        base = verify(example.gold, messages, state)
        if not base.formatted:
            return Verdict(0.0, False, {**base.details, "judge": NO_ANSWER})
        correct, source = self.judge_answer(example.public["question"], base.details["pred"],
                                            example.gold["answers"])
        details = {**base.details, "em": base.reward, "judge": source, "judge_model": self.model}
        if source == EM_FALLBACK:
            details["judge_error"] = self.down
        return Verdict(float(correct), True, details)

    def judge_answer(self, question: str, answer: str | None, golds: list[str]) -> tuple[bool, str]:
        """``(correct, source)``; source is no_answer, cache, llm or em_fallback."""
        if answer is None:
            return False, NO_ANSWER
        key = cache_key(self.model, question, answer, golds)
        if key in self.cache:
            return self.cache[key], CACHED
        if self.down is None:
            try:
                correct = self._ask(question, answer, golds)
            except ApiUnavailable as e:
                self.down = str(e)
            else:
                if correct is not None:
                    self._remember(key, correct, question, answer)
                    return correct, LLM
        gold = {normalize_answer(g) for g in golds} - {""}
        return normalize_answer(answer) in gold, EM_FALLBACK

    def _ask(self, question: str, answer: str, golds: list[str]) -> bool | None:
        """Claude's verdict, or None when the reply is not one of the two words."""
        if self._ready is None:
            self._ready = make_client(self._client, self.timeout_s)
        client = self._ready
        prompt = (f"Question: {question}\nGold answers: {json.dumps(list(golds), ensure_ascii=False)}\n"
                  f"Predicted answer: {answer}\n\nVerdict (CORRECT or INCORRECT):")
        # no temperature: SDK 2.x no longer takes sampling parameters; the cache is what makes
        # a verdict reproducible
        request = {"model": self.model, "max_tokens": 16, "system": SYSTEM,
                   "messages": [{"role": "user", "content": prompt}], "timeout": self.timeout_s}
        reply = create_message(client, request, self.retries, self.backoff_base_s,
                               self.max_sleep_s, self.sleep)
        said = " ".join(b.text for b in reply.content if b.type == "text").strip().upper()
        word = said.split()[0].strip(".:!*") if said else ""
        return {"CORRECT": True, "INCORRECT": False}.get(word)

    def _remember(self, key: str, correct: bool, question: str, answer: str) -> None:
        self.cache[key] = correct
        if self.cache_path is None:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        row = {"key": key, "correct": correct, "model": self.model, "question": question, "answer": answer}
        # one appended line per verdict: a crash can cut only the last line, which _load skips
        # (and the next verdict starts on a fresh line)
        with self.cache_path.open("a+b") as f:
            cut = False
            size = f.seek(0, 2)
            if size:
                f.seek(size - 1)
                cut = f.read(1) != b"\n"
            f.write((("\n" if cut else "") + json.dumps(row, ensure_ascii=False) + "\n").encode())


def cache_key(model: str, question: str, answer: str, golds: list[str]) -> str:
    payload = json.dumps([model, question.strip(), answer.strip(), sorted(golds)], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _load(path: Path | None) -> dict[str, bool]:
    cache: dict[str, bool] = {}
    if path is None or not path.exists():
        return cache
    with path.open() as f:
        for line in f:
            try:
                row = json.loads(line)
                cache[row["key"]] = bool(row["correct"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut by a crash: that verdict is simply asked again
    return cache
