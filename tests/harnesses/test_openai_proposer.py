"""The OpenAI-compatible proposer against a loopback chat-completions server, with a real store."""
from __future__ import annotations

import pytest

from harnesses.proposers import ProposerUnavailable
from harnesses.proposers.openai_chat import OpenAIProposer
from tests.support.chat_server import ChatServer, call, failure, reply
from tests.support.proposer import GOOD, H0_ID, PROMPT


def proposer(srv, sleeps=None, **kw) -> OpenAIProposer:
    kw = {"max_turns": 10, "retries": 3, "backoff_base_s": 0.01, "api_key": "k", **kw}
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return OpenAIProposer(srv.base_url, "coder", sleep=sleep, **kw)


def write(source, axis="budgets"):
    return call("write_candidate", {"source": source, "hypothesis": "more turns finish two-hop questions",
                                    "axis": axis, "components": ["turn_budget"]})


def test_scripted_session_writes_candidates_with_the_claude_tools_and_no_test_rows(ctx):
    script = [
        reply(call("read_harness", {"harness_id": H0_ID}), content="Reading the incumbent."),
        reply(call("sql", {"query": "SELECT split, count(*) AS n FROM rollouts GROUP BY split"}),
              call("sql", "{not json")),
        reply(write("class Harness(:\n    pass\n")),
        reply(write(GOOD), prompt_tokens=100, completion_tokens=50),
        reply(write(PROMPT, axis="prompt")),
        reply(call("finish", {})),
    ]
    with ChatServer(script) as srv:
        proposal = proposer(srv).propose(ctx)
        requests = srv.requests
    assert proposal.proposer == "openai" and proposal.model == "coder"
    assert [c.source for c in proposal.candidates] == [GOOD, PROMPT]
    assert {c.origin for c in proposal.candidates} == {"openai"}
    assert proposal.input_tokens == 10 * 5 + 100 and proposal.output_tokens == 5 * 5 + 50
    # the tools are the Claude proposer's, in the function-calling format
    names = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"read_harness", "sql", "write_candidate", "finish"} <= names
    tool_messages = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert "class Harness" in tool_messages[0]
    assert "harness" in tool_messages[1] and "test" not in tool_messages[1]  # the view has no test rows
    assert tool_messages[2].startswith("ERROR: the arguments are not valid JSON")
    broken = [m["content"] for m in requests[3]["messages"] if m["role"] == "tool"][-1]
    assert broken.startswith("ERROR") and "syntax" in broken.lower()
    assert srv.headers[0]["authorization"] == "Bearer k"


def test_transient_failures_are_retried_and_client_errors_are_not(ctx):
    sleeps: list[float] = []
    with ChatServer([failure(429), failure(503), reply(write(GOOD)), reply(call("finish", {}))]) as srv:
        proposal = proposer(srv, sleeps).propose(ctx)
    assert [c.source for c in proposal.candidates] == [GOOD] and len(sleeps) == 2 and sleeps[1] > sleeps[0]
    with ChatServer([failure(400)]) as srv, pytest.raises(ProposerUnavailable, match="refused the request"):
        proposer(srv).propose(ctx)
    with ChatServer([failure(500)] * 3) as srv, pytest.raises(ProposerUnavailable, match="after 3 attempts"):
        proposer(srv).propose(ctx)


def test_a_session_without_a_valid_candidate_is_unavailable(ctx):
    with ChatServer([reply(content="I am thinking.")] * 3) as srv, \
            pytest.raises(ProposerUnavailable, match="no valid candidate after 3 turns") as err:
        proposer(srv, max_turns=3).propose(ctx)
    assert err.value.input_tokens == 30  # what the failed session spent is carried to the fallback


def test_tool_choice_is_sent_and_a_failed_session_keeps_its_messages(ctx):
    with pytest.raises(ValueError, match="tool_choice"):
        OpenAIProposer("http://127.0.0.1:9/v1", "coder", tool_choice="any")
    with ChatServer([reply(write("class Harness(:\n    pass\n")), reply(call("finish", {}))]) as srv, \
            pytest.raises(ProposerUnavailable, match="no valid candidate") as err:
        proposer(srv, tool_choice="required", max_turns=2).propose(ctx)
    assert [r["tool_choice"] for r in srv.requests] == ["required", "required"]
    roles = [m["role"] for m in err.value.transcript]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert err.value.transcript[3]["content"].startswith("ERROR")  # why the session failed is kept
