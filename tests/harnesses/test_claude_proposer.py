"""The Claude proposer against a loopback Messages-API server, with the real SDK and a real store."""
from __future__ import annotations

import json

import anthropic
import pytest

from harnesses.proposers import (
    Proposal,
    ProposerUnavailable,
    propose_with_fallback,
    proposer_view,
)
from harnesses.proposers.claude import ClaudeProposer
from harnesses.proposers.claude_tools import check_source
from tests.support.messages_server import MessagesServer, error, message, slow, text, tool_use
from tests.support.proposer import GOOD, H0, H0_ID, PROMPT, rollout
from whale.clients.anthropic import Usage, estimate_cost
from whale.store import Store


def _proposer(srv, sleeps=None, **kw) -> ClaudeProposer:
    client = anthropic.Anthropic(base_url=srv.base_url, api_key="test")
    kw = {"model": "claude-opus-4-7", "max_tokens": 2000, "timeout_s": 10, "max_turns": 12,
          "retries": 3, "backoff_base_s": 0.01, "max_sleep_s": 5.0, **kw}
    if sleeps is not None:
        kw["sleep"] = sleeps.append  # record the backoff instead of waiting
    return ClaudeProposer(client=client, **kw)


def _results(request: dict) -> list[dict]:
    """The tool_result blocks the client sent in a request's last message."""
    return [b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


def _write(source, axis="budgets", hypothesis="three turns let two-hop questions finish"):
    return tool_use("write_candidate", {"source": source, "hypothesis": hypothesis, "axis": axis,
                                        "components": ["turn_budget"]})


def test_scripted_session_collects_candidates_and_hides_the_test_split(ctx):
    script = [
        message(text("Reading the archive."), tool_use("list_harnesses", {}), input_tokens=100, output_tokens=20),
        message(tool_use("read_harness", {"harness_id": H0_ID}), input_tokens=200, output_tokens=10),
        message(tool_use("sql", {"query": "SELECT count(*) AS n FROM rollouts WHERE split = 'test'"}),
                tool_use("sql", {"query": "SELECT split, count(*) FROM rollouts GROUP BY split"}),
                tool_use("sql", {"query": "DELETE FROM rollouts"}),
                tool_use("sql", {"query": f"SELECT * FROM read_text('{ctx.notes_path}')"}),
                input_tokens=300, output_tokens=30),
        message(_write("class Harness(:\n    pass\n"), input_tokens=400, output_tokens=40),
        message(_write(GOOD), input_tokens=500, output_tokens=50),
        message(_write(PROMPT, axis="prompt", hypothesis="asking to think first raises format rate"),
                input_tokens=600, output_tokens=60),
        message(tool_use("finish", {}), input_tokens=700, output_tokens=5),
    ]
    with MessagesServer(script) as srv:
        proposal = _proposer(srv).propose(ctx)
        requests = srv.requests
    assert isinstance(proposal, Proposal) and proposal.proposer == "claude"
    assert [c.source for c in proposal.candidates] == [GOOD, PROMPT]
    assert [c.axis for c in proposal.candidates] == ["budgets", "prompt"]
    assert proposal.candidates[1].hypothesis == "asking to think first raises format rate"
    assert all(c.parents == [H0_ID] and c.origin == "claude" for c in proposal.candidates)
    assert (proposal.input_tokens, proposal.output_tokens) == (2800, 215)
    assert proposal.cost_usd == pytest.approx((2800 * 5 + 215 * 25) / 1e6)
    assert len(requests) == 7  # finish ends the session without another request

    first = requests[0]
    assert "Read failures before proposing" in first["system"] and "at most 3 passages" in first["system"]
    assert {t["name"] for t in first["tools"]} >= {"list_harnesses", "sql", "write_candidate", "finish"}
    assert H0 in first["messages"][0]["content"] and first["cache_control"] == {"type": "ephemeral"}
    assert "output_config" not in first  # no effort configured: the API default
    listed = [json.loads(line) for line in _results(requests[1])[0]["content"].splitlines()]
    assert listed[0]["harness_id"] == H0_ID and listed[0]["incumbent"] is True
    assert [s["mean_reward"] for s in listed[0]["scores"]] == [0.25]  # the test score is invisible
    assert _results(requests[2])[0]["content"] == H0
    count, by_split, delete, read_file = _results(requests[3])
    assert count["content"].splitlines() == ["n", "0"] and not count["is_error"]
    assert by_split["content"].splitlines()[1:] == ["harness\t2"]
    assert delete["is_error"] and "only SELECT" in delete["content"]
    assert read_file["is_error"] and "NOTE" not in read_file["content"]
    syntax = _results(requests[4])[0]
    assert syntax["is_error"] and "SyntaxError" in syntax["content"] and "line 1" in syntax["content"]
    assert not _results(requests[5])[0]["is_error"]


def test_view_has_no_test_rows_and_no_token_columns(ctx):
    with Store(ctx.store_path) as store:  # the orchestrator holds the file open for writing
        with pytest.raises(RuntimeError, match="ProposerContext.store"):
            proposer_view(ctx)
        ctx.store = store
        view = proposer_view(ctx)
        store.insert_rollouts([rollout("harness", "c", 1.0)])  # the writer still works
    splits = view.execute("SELECT DISTINCT split FROM rollouts").fetchall()
    columns = {c[0] for c in view.execute("DESCRIBE rollouts").fetchall()}
    assert splits == [("harness",)] and "token_ids" not in columns and "mask" not in columns
    assert view.execute("SELECT count(*) FROM rollouts").fetchone() == (2,)  # a copy, not a window
    assert view.execute("SELECT messages->>'$[0].content' FROM rollouts LIMIT 1").fetchone() == ("secret-harness",)
    assert view.execute("SELECT split FROM scores").fetchall() == [("harness",)]
    ctx.store = None
    closed = proposer_view(ctx)  # nobody holds the file: ATTACH read-only, copy, DETACH
    assert closed.execute("SELECT count(*) FROM rollouts").fetchone() == (3,)
    attached = "SELECT count(*) FROM duckdb_databases() WHERE database_name = 'run_store'"
    assert closed.execute(attached).fetchone() == (0,)


def test_rate_limit_then_overload_then_success(ctx):
    sleeps = []
    script = [error(429, "rate_limit_error", headers={"retry-after": "7"}), error(529, "overloaded_error"),
              message(_write(GOOD)), message(tool_use("finish", {}))]
    with MessagesServer(script) as srv:
        proposal = _proposer(srv, sleeps, effort="max").propose(ctx)
        assert len(srv.requests) == 4
        assert srv.requests[2]["output_config"] == {"effort": "max"}
        assert srv.headers[0]["x-stainless-retry-count"] == "0"  # the SDK itself does not retry
    assert [c.source for c in proposal.candidates] == [GOOD]
    assert sleeps == [5.0, 0.02]  # retry-after 7 s capped at 5 s; then base * 2


def test_timeout_is_retried(ctx):
    script = [slow(message(text("late")), 1.5), message(_write(GOOD)), message(tool_use("finish", {}))]
    with MessagesServer(script) as srv:
        proposal = _proposer(srv, [], timeout_s=0.3).propose(ctx)
    assert len(proposal.candidates) == 1


def test_persistent_failure_raises_unavailable(ctx):
    sleeps = []
    script = [message(tool_use("list_harnesses", {}), input_tokens=50, output_tokens=7),
              error(500), error(529, "overloaded_error"), error(429, "rate_limit_error")]
    with MessagesServer(script) as srv:
        with pytest.raises(ProposerUnavailable, match="3 attempts failed") as info:
            _proposer(srv, sleeps).propose(ctx)
        assert len(srv.requests) == 4
    assert sleeps == [0.01, 0.02]
    assert (info.value.input_tokens, info.value.output_tokens) == (50, 7)  # spent before failing


def test_client_errors_are_not_retried(ctx):
    with MessagesServer([error(401, "authentication_error", "invalid x-api-key")]) as srv:
        with pytest.raises(ProposerUnavailable, match="HTTP 401"):
            _proposer(srv, []).propose(ctx)
        assert len(srv.requests) == 1


@pytest.mark.parametrize("config_dir", [False, True])
def test_missing_credentials_are_unavailable_without_a_request(ctx, monkeypatch, tmp_path, config_dir):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/anthropic profile either
    if config_dir:  # a config dir without a profile: the SDK raises while building the client
        monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "empty"))
    with MessagesServer([]) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        with pytest.raises(ProposerUnavailable, match="credentials|Config file"):
            ClaudeProposer().propose(ctx)
        assert srv.requests == []


def test_no_candidate_within_max_turns_is_unavailable(ctx):
    script = [message(text("thinking")), message(tool_use("finish", {}))]
    with MessagesServer(script) as srv:
        with pytest.raises(ProposerUnavailable, match="no valid candidate after 2 turns"):
            _proposer(srv, [], max_turns=2).propose(ctx)
        assert "write_candidate" in srv.requests[1]["messages"][-1]["content"]  # the nudge


def test_fallback_records_reason_and_spent_tokens(ctx):
    class Fixed:
        name = "offline"

        def propose(self, ctx):
            return Proposal(candidates=[], proposer="offline", model=None)

    replies = [message(text("hm"), input_tokens=11, output_tokens=3), error(400, "invalid_request_error")]
    with MessagesServer(replies) as srv:
        proposal = propose_with_fallback(_proposer(srv, []), Fixed(), ctx)
    assert proposal.proposer == "offline" and proposal.fallback_reason.startswith("claude: HTTP 400")
    assert (proposal.input_tokens, proposal.output_tokens) == (11, 3)


def test_candidate_rules(ctx):
    assert check_source(GOOD) is None
    assert "class Harness" in check_source("x = 1\n")
    assert "import of 'os'" in check_source("import os\n" + GOOD)  # the sandbox's static rules
    assert check_source(PROMPT, incumbent=H0) is None  # only prose changed
    assert "prompt-only" in check_source(GOOD, incumbent=H0)  # a number changed
    script = [message(_write(H0), _write(GOOD), _write(GOOD.replace("3", "4")),
                      _write(PROMPT, axis="prompt"), _write(PROMPT, axis="parsing")),
              message(tool_use("finish", {}))]
    with MessagesServer(script) as srv:
        proposal = _proposer(srv, []).propose(ctx)
        dup, ok, same_axis, ok2, over = _results(srv.requests[1])
    assert "identical to harness" in dup["content"] and "already written" in same_axis["content"]
    assert "call finish" in over["content"] and not ok["is_error"] and not ok2["is_error"]
    assert len(proposal.candidates) == 2


def test_unknown_model_costs_nothing():
    u = Usage(input=1000, cache_write=100, cache_read=1000, output=10)
    assert estimate_cost("some-other-model", u) == 0.0
    assert estimate_cost("claude-sonnet-4-5", u) == pytest.approx((1000 * 3 + 125 * 3 + 100 * 3 + 10 * 15) / 1e6)


def test_search_spans_archive_notes_and_visible_traces_and_edit_submits_a_patch(ctx):
    patch = [{"old": "max_turns = 2", "new": "max_turns = 3"}]
    script = [message(tool_use("search", {"pattern": "secret-|max_turns|3 passages"}),
                      tool_use("search", {"pattern": "(unclosed"}),
                      tool_use("edit_candidate", {"base": H0_ID, "edits": [{"old": "max_turns = 9", "new": "x"}],
                                                  "hypothesis": "h", "axis": "budgets", "components": ["t"]}),
                      tool_use("edit_candidate", {"base": H0_ID, "edits": patch, "hypothesis": "three turns",
                                                  "axis": "budgets", "components": ["turn_budget"]})),
              message(tool_use("finish", {}))]
    with MessagesServer(script) as srv:
        proposal = _proposer(srv).propose(ctx)
        found, bad, missing, edited = _results(srv.requests[1])
    assert f"harness {H0_ID} line 5: max_turns = 2" in found["content"]
    assert "notes line 1" in found["content"] and "secret-harness" in found["content"]
    assert "secret-test" not in found["content"] and "secret-weight" not in found["content"]  # view only
    assert bad["is_error"] and "not a regular expression" in bad["content"]
    assert missing["is_error"] and "does not occur" in missing["content"]
    assert not edited["is_error"]
    (c,) = proposal.candidates
    assert c.source == GOOD and c.parents == [H0_ID]
