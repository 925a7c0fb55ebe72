"""A harness-only run whose proposer is Claude, reached through the real SDK at a loopback server.

The proposer unit tests drive `ClaudeProposer` directly; this one checks the wiring a user relies
on: `proposer: claude` in params, credentials and base URL from the environment, the candidate
archived with its hypothesis, scored under the run's weights, the tokens in the ledger and the
session's transcript saved next to the archive.
"""
import json
from pathlib import Path

import duckdb

from tests.support.messages_server import MessagesServer, message, text, tool_use
from whale.testing import make_project

ROOT = Path(__file__).resolve().parents[2]
H0 = (ROOT / "harnesses" / "examples" / "chess_choice.py").read_text()
CANDIDATE = H0.replace("Reply with the best move in UCI notation.",
                       "Checks and captures first. Reply with the best move in UCI notation.")
HYPOTHESIS = "pointing at forcing moves first raises the solve rate"


def test_claude_proposer_in_a_harness_only_run(tmp_path, tiny_model_dir, monkeypatch):
    from flows.whale import whale

    assert CANDIDATE != H0
    overrides = make_project(tmp_path, tiny_model_dir)
    overrides["harness_search"].update(proposer="claude", claude={"retries": 1, "timeout_s": 20})
    overrides["schedule"]["budget"] = 4  # re-evaluate h0 (2 rollouts), then one Claude iteration (2)
    monkeypatch.chdir(tmp_path)
    script = [
        message(text("Trying one prompt change."),
                tool_use("write_candidate", {"source": CANDIDATE, "hypothesis": HYPOTHESIS, "axis": "prompt",
                                             "components": ["instructions"]}),
                input_tokens=1200, output_tokens=300),
        message(tool_use("finish", {}), input_tokens=1500, output_tokens=10),
    ]
    with MessagesServer(script) as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
        assert srv.remaining == 0 and len(srv.requests) == 2

    run_dir = tmp_path / "runs" / "chess_puzzles-harness_only"
    con = duckdb.connect(str(run_dir / "rollouts.duckdb"), read_only=True)
    try:
        calls = con.execute("SELECT proposer, input_tokens, output_tokens, cost_usd, fallback_reason "
                            "FROM proposer_calls").fetchall()
        archived = con.execute("SELECT harness_id, origin, hypothesis, axis, status FROM harnesses "
                               "WHERE origin <> 'seed'").fetchall()
        scored = con.execute("SELECT harness_id, iteration, n FROM scores WHERE split = 'harness' "
                             "ORDER BY iteration").fetchall()
    finally:
        con.close()
    assert calls == [("claude", 2700, 310, calls[0][3], None)] and calls[0][3] > 0
    assert len(archived) == 1 and archived[0][1:] == ("claude", HYPOTHESIS, "prompt", "ok")
    cid = archived[0][0]
    assert (run_dir / "harnesses" / f"{cid}.py").read_text() == CANDIDATE
    assert [(h, i) for h, i, _ in scored][-1] == (cid, 2) and scored[-1][2] == 2  # one per harness example

    transcript = json.loads((run_dir / "proposals" / "c1-i2.json").read_text())
    assert transcript["proposer"] == "claude"
    roles = [m["role"] for m in transcript["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert transcript["messages"][1]["content"][1]["input"]["hypothesis"] == HYPOTHESIS


def test_openai_compatible_proposer_in_a_harness_only_run(tmp_path, tiny_model_dir, monkeypatch):
    from flows.whale import whale
    from tests.support.chat_server import ChatServer, call, reply

    overrides = make_project(tmp_path, tiny_model_dir)
    overrides["schedule"]["budget"] = 4  # re-evaluate h0 (2 rollouts), then one proposer iteration (2)
    monkeypatch.chdir(tmp_path)
    script = [reply(call("write_candidate", {"source": CANDIDATE, "hypothesis": HYPOTHESIS, "axis": "prompt",
                                             "components": ["instructions"]}), prompt_tokens=900),
              reply(call("finish", {}))]
    with ChatServer(script) as srv:
        overrides["harness_search"].update(proposer="openai", openai={"base_url": srv.base_url, "model": "coder",
                                                                      "retries": 1})
        whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
        assert not srv.script and len(srv.requests) == 2
    con = duckdb.connect(str(tmp_path / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"), read_only=True)
    try:
        calls = con.execute("SELECT proposer, model, input_tokens, fallback_reason FROM proposer_calls").fetchall()
        archived = con.execute("SELECT origin, hypothesis, status FROM harnesses WHERE origin <> 'seed'").fetchall()
    finally:
        con.close()
    assert calls == [("openai", "coder", 910, None)] and archived == [("openai", HYPOTHESIS, "ok")]


def test_claude_tries_a_draft_before_submitting_and_the_draft_is_charged(tmp_path, tiny_model_dir, monkeypatch):
    """`try_candidate` rolls a draft on the harness split under the run's weights: the answer
    reaches Claude, the rollouts are charged to the budget (the `drafts` table and the ledger)
    and never stored as rollouts; past the iteration's allowance a second draft is refused and
    the session goes on to submit."""
    from flows.whale import whale

    overrides = make_project(tmp_path, tiny_model_dir)
    overrides["harness_search"].update(proposer="claude", claude={"retries": 1, "timeout_s": 20},
                                       drafts=2, draft_examples=2)
    # h0 (2) + room for one draft (2) beside the iteration's candidate (2) and the re-check (4)
    overrides["schedule"]["budget"] = 10
    monkeypatch.chdir(tmp_path)
    script = [
        message(tool_use("try_candidate", {"source": CANDIDATE})),
        message(tool_use("try_candidate", {"source": CANDIDATE})),
        message(tool_use("write_candidate", {"source": CANDIDATE, "hypothesis": HYPOTHESIS, "axis": "prompt",
                                             "components": ["instructions"]})),
        message(tool_use("finish", {})),
    ]
    with MessagesServer(script) as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
        assert srv.remaining == 0
        assert "try_candidate" in {t["name"] for t in srv.requests[0]["tools"]}
        first, second = (srv.requests[i]["messages"][-1]["content"][0] for i in (1, 2))

    assert first["type"] == "tool_result" and not first.get("is_error")
    answer = first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
    assert "draft rolled on 2 harness-split example(s)" in answer and "transcript of" in answer
    refused = second["content"] if isinstance(second["content"], str) else second["content"][0]["text"]
    assert second.get("is_error") and "no budget left for drafts" in refused

    con = duckdb.connect(str(tmp_path / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"), read_only=True)
    try:
        drafts = con.execute("SELECT cycle, iteration, draft, rollouts FROM drafts").fetchall()
        ledger = dict(con.execute("SELECT phase, sum(rollouts) FROM ledger WHERE phase <> 'eval' "
                                  "GROUP BY phase").fetchall())
        stored = con.execute("SELECT count(*) FROM rollouts WHERE step = 2 AND harness_id NOT IN "
                             "(SELECT harness_id FROM harnesses)").fetchone()[0]
        reason = con.execute("SELECT reason FROM phases WHERE phase = 'harness'").fetchone()[0]
    finally:
        con.close()
    assert drafts == [(1, 2, 0, 2)] and stored == 0
    assert ledger["draft"] == 2 and ledger["draft"] + ledger["harness"] == 10  # the budget binds, drafts in it
    assert "budget" in reason
