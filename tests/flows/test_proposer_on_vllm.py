"""The OpenAI-compatible proposer against a real model server: the project's vLLM server
(``VLLMServer``, the run's own rollout server class) serving the embedded SmolLM2-135M.

The scripted servers of the unit tests answer what a test wrote; here a real model writes the
replies. A 135M chat model is no harness engineer: with ``tool_choice: required`` vLLM constrains
its replies to tool calls, and what the model puts in the calls (arguments the tool does not take,
ids that do not exist, code that does not parse) is what the Workbench must answer with errors
while the session goes on; a call cut at ``max_tokens`` comes back as text and is nudged. The run
must go on too: a session that ends without a valid candidate falls back to the offline proposer,
with the session's messages saved and its tokens in the ledger, and a server too slow for the
request timeout is retried, then given up on, without wedging the server.
"""
import json

import duckdb
import httpx
import pytest

from whale.testing import make_project

pytestmark = pytest.mark.slow  # starts a vLLM server on the real SmolLM2


@pytest.fixture(scope="module")
def smollm_server(smollm_dir, vllm_python, tmp_path_factory):
    from whale.rollout.backends.vllm_server import ServerConfig, VLLMServer

    log_dir = tmp_path_factory.mktemp("proposer_server")
    # started as a proposer's server is (params.yaml harness_search.openai): tool calls parsed
    server = VLLMServer(str(smollm_dir), ServerConfig(
        python=vllm_python, kv_cache_gb=1, max_num_seqs=4, max_model_len=8192, log_dir=str(log_dir),
        extra_args=("--enable-auto-tool-choice", "--tool-call-parser", "hermes")))
    server.start()
    yield server
    server.stop()
    assert not server.alive()


def session_of(proposal_file) -> list[dict]:
    saved = json.loads(proposal_file.read_text())
    return saved.get("failed_session") or saved["messages"]


def test_a_run_whose_proposer_is_smollm_on_vllm_goes_on(tmp_path, tiny_model_dir, smollm_server, monkeypatch):
    from flows.whale import whale

    overrides = make_project(tmp_path, tiny_model_dir)
    overrides["schedule"]["budget"] = 4  # re-evaluate h0 (2 rollouts), then one proposer iteration (2)
    overrides["harness_search"].update(proposer="openai", drafts=0, openai={
        "base_url": smollm_server.base_url, "model": "whale", "tool_choice": "required", "max_tokens": 160,
        "max_turns": 3, "retries": 2, "timeout_s": 300})
    monkeypatch.chdir(tmp_path)
    result = whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
    assert result["rollouts"] >= 4

    run_dir = tmp_path / "runs" / "chess_puzzles-harness_only"
    con = duckdb.connect(str(run_dir / "rollouts.duckdb"), read_only=True)
    try:
        calls = con.execute("SELECT proposer, input_tokens, output_tokens, fallback_reason "
                            "FROM proposer_calls").fetchall()
        candidates = con.execute("SELECT origin, status FROM harnesses WHERE origin <> 'seed'").fetchall()
        decided = con.execute("SELECT decision FROM phases WHERE phase = 'harness'").fetchall()
    finally:
        con.close()
    [(proposer, tokens_in, tokens_out, reason)] = calls
    assert tokens_in > 1000 and tokens_out > 0  # the real server's usage, counted even on fallback
    if proposer == "openai":  # the model wrote a valid harness: it was archived as its own
        assert reason is None and {o for o, _ in candidates} == {"openai"}
    else:  # the usual case: no valid candidate in three turns, the offline proposer's instead
        assert reason.startswith("openai: no valid candidate after 3 turns") and candidates
    assert all(status != "pending" for _, status in candidates) and decided  # candidates judged, phase ended

    messages = session_of(run_dir / "proposals" / "c1-i2.json")
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    calls = [c for i in replies for c in messages[i].get("tool_calls") or []]
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(replies) == 3 and calls and len(answers) == len(calls)  # every call the server parsed, answered
    for i in replies:
        if not messages[i].get("tool_calls"):  # a call cut at max_tokens comes back as text: nudged
            assert messages[i + 1]["role"] == "user" and "write_candidate" in messages[i + 1]["content"]
    if proposer != "openai":
        assert any(a.startswith("ERROR") for a in answers)  # what the model got wrong, told to it


def test_timeouts_are_retried_then_given_up_without_wedging_the_server(tmp_path, smollm_server):
    from harnesses.proposers import ProposerUnavailable
    from harnesses.proposers.openai_chat import OpenAIProposer
    from tests.support.proposer import make_context

    sleeps: list[float] = []
    slow = OpenAIProposer(smollm_server.base_url, "whale", max_tokens=2000, timeout_s=0.2, retries=2,
                          backoff_base_s=0.01, sleep=sleeps.append)
    with pytest.raises(ProposerUnavailable, match="unavailable after 2 attempts .*Timeout") as err:
        slow.propose(make_context(tmp_path))
    assert len(sleeps) == 1 and err.value.transcript[0]["role"] == "system"
    # the abandoned requests did not leave the server stuck: a plain request is answered
    r = httpx.post(f"{smollm_server.base_url}/chat/completions", timeout=120, json={
        "model": "whale", "max_tokens": 8, "messages": [{"role": "user", "content": "Say hi."}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


def test_a_model_that_answers_in_prose_is_nudged_then_given_up_on(tmp_path, smollm_server):
    """`auto` leaves the call to the model; SmolLM2 was not trained to call tools and answers in
    prose. Each such reply is answered with a nudge to use the tools, and after `max_turns` the
    session ends without a candidate, with its messages kept for the run's log."""
    from harnesses.proposers import ProposerUnavailable
    from harnesses.proposers.openai_chat import OpenAIProposer
    from tests.support.proposer import make_context

    auto = OpenAIProposer(smollm_server.base_url, "whale", max_tokens=48, timeout_s=120, max_turns=2, retries=1,
                          tool_choice="auto", sleep=lambda s: pytest.fail("a good answer was retried"))
    with pytest.raises(ProposerUnavailable, match="no valid candidate after 2 turns") as err:
        auto.propose(make_context(tmp_path))
    messages = err.value.transcript
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert all(m["content"] and not m.get("tool_calls") for m in messages if m["role"] == "assistant")
    assert err.value.input_tokens > 1000 and err.value.output_tokens > 0
