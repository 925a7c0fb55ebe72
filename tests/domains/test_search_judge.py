"""The optional search-QA LLM judge against a loopback Messages-API server with the real SDK."""
from __future__ import annotations

import anthropic

from domains.search_qa.judge import LLMJudge
from tests.support.messages_server import MessagesServer, error, message, text
from whale.types import Example

EXAMPLE = Example(id="q1", split="harness", public={"question": "Where was Ada Quill born?"},
                  gold={"answers": ["Paris"]})


def _said(answer: str) -> list[dict]:
    return [{"role": "user", "content": "Question: Where was Ada Quill born?"},
            {"role": "assistant", "content": f"<answer>{answer}</answer>"}]


def _judge(srv, tmp_path, **kw) -> LLMJudge:
    client = anthropic.Anthropic(base_url=srv.base_url, api_key="test")
    kw = {"model": "claude-haiku-4-5", "retries": 3, "backoff_base_s": 0.01, "sleep": lambda s: None, **kw}
    return LLMJudge(cache_path=tmp_path / "judge.jsonl", client=client, **kw)


def test_judge_accepts_a_qualified_answer_and_caches_it(tmp_path):
    with MessagesServer([message(text("CORRECT"))]) as srv:
        verdict = _judge(srv, tmp_path).verify(EXAMPLE, _said("Paris, France"), {})
        request = srv.requests[0]
        again = _judge(srv, tmp_path).verify(EXAMPLE, _said("Paris, France"), {})  # a fresh judge, same file
        assert len(srv.requests) == 1  # the cache answered: no second request
    assert verdict.reward == 1.0 and verdict.formatted
    assert verdict.details["em"] == 0.0 and verdict.details["judge"] == "llm"  # EM alone says wrong
    assert again.reward == 1.0 and again.details["judge"] == "cache"
    assert request["max_tokens"] == 16 and "one word" in request["system"]
    user = request["messages"][0]["content"]
    assert "Where was Ada Quill born?" in user and '["Paris"]' in user and "Paris, France" in user


def test_missing_answer_tag_scores_zero_without_a_request(tmp_path):
    with MessagesServer([]) as srv:
        verdict = _judge(srv, tmp_path).verify(EXAMPLE, [{"role": "assistant", "content": "Paris"}], {})
        assert srv.requests == []
    assert verdict.reward == 0.0 and not verdict.formatted and verdict.details["judge"] == "no_answer"


def test_incorrect_verdict_overrides_nothing_else(tmp_path):
    with MessagesServer([message(text("INCORRECT."))]) as srv:
        verdict = _judge(srv, tmp_path).verify(EXAMPLE, _said("Lyon"), {})
    assert verdict.reward == 0.0 and verdict.formatted and verdict.details["pred"] == "Lyon"


def test_api_failure_falls_back_to_exact_match(tmp_path):
    sleeps = []
    script = [error(500), error(529, "overloaded_error"), error(429, "rate_limit_error")]
    with MessagesServer(script) as srv:
        judge = _judge(srv, tmp_path, sleep=sleeps.append)
        exact = judge.verify(EXAMPLE, _said("the Paris"), {})
        other = judge.verify(EXAMPLE, _said("Paris, France"), {})
        assert len(srv.requests) == 3  # the second answer did not wait on a dead API
    assert sleeps == [0.01, 0.02]
    assert exact.reward == 1.0 and exact.details["judge"] == "em_fallback"
    assert "3 attempts failed" in exact.details["judge_error"]
    assert other.reward == 0.0 and other.details["judge"] == "em_fallback"
    assert not (tmp_path / "judge.jsonl").exists()  # fallback verdicts are not cached


def test_unreadable_reply_is_not_cached(tmp_path):
    with MessagesServer([message(text("Probably right")), message(text("CORRECT"))]) as srv:
        first = _judge(srv, tmp_path).judge_answer("Q?", "Paris, France", ["Paris"])
        second = _judge(srv, tmp_path).judge_answer("Q?", "Paris, France", ["Paris"])
    assert first == (False, "em_fallback") and second == (True, "llm")


def test_a_cut_cache_line_is_skipped(tmp_path):
    with MessagesServer([message(text("CORRECT")), message(text("INCORRECT"))]) as srv:
        _judge(srv, tmp_path).judge_answer("Q?", "Paris, France", ["Paris"])
        path = tmp_path / "judge.jsonl"
        path.write_text(path.read_text() + '{"key": "abc", "corr')  # a crash mid-write
        judge = _judge(srv, tmp_path)
        assert judge.judge_answer("Q?", "Paris, France", ["Paris"]) == (True, "cache")
        assert judge.judge_answer("Q?", "Lyon", ["Paris"]) == (False, "llm")
    assert _judge(srv, tmp_path).judge_answer("Q?", "Lyon", ["Paris"]) == (False, "cache")


def test_no_answer_short_circuits(tmp_path):
    with MessagesServer([]) as srv:
        assert _judge(srv, tmp_path).judge_answer("Q?", None, ["Paris"]) == (False, "no_answer")
        assert srv.requests == []


def test_no_credentials_means_exact_match(tmp_path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with MessagesServer([]) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        verdict = LLMJudge().verify(EXAMPLE, _said("Paris"), {})
        assert srv.requests == []
    assert verdict.reward == 1.0 and verdict.details["judge"] == "em_fallback"
    assert "ANTHROPIC_API_KEY" in verdict.details["judge_error"]
