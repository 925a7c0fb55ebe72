"""The offline proposer against a real run store, real seed harnesses, real domains and the sandbox."""
from __future__ import annotations

import pytest

from domains import get_domain
from harnesses.contract import Prompt, from_wire
from harnesses.proposers.claude_tools import check_source
from harnesses.proposers.offline import (
    OfflineProposer,
    failure_profile,
    harness_id,
    masked,
    rank,
)
from harnesses.proposers.primitives import FAILURES, applied_tags, library
from harnesses.sandbox import HarnessSandbox, static_violations
from harnesses.validate import prompt_only_violation
from tests.offline_support import CHESS, MATH, PROGRAM, SEARCH, SEEDS, context, edited, primitive_of, register, rollout
from whale.store import Store


def test_failure_profile_reads_the_latest_weights_harness_split_only(tmp_path):
    hid = harness_id(MATH)
    rows = [rollout(hid, 0, formatted=True, reward=1.0), rollout(hid, 1, formatted=True),
            rollout(hid, 2, stop="truncated"), rollout(hid, 3, stop="turn_cap"),
            rollout(hid, 4, stop="error"),
            rollout(hid, 5, messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "5"}]),
            rollout(hid, 6, messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"},
                                      {"role": "user", "content": "Error: Traceback (most recent call last)"}]),
            rollout(hid, 7),
            # older weights and other splits must not count
            rollout(hid, 8, weights="w1", cycle=0, stop="error"), rollout(hid, 9, split="test", stop="error")]
    ctx = context(tmp_path, "math_reasoning", MATH, rows)
    with Store(ctx.store_path, read_only=True) as store:
        p = failure_profile(store.con, hid)
    assert p["n"] == 8 and p["weights_id"] == "w2"
    assert p["success"] == 1 / 8 and p["wrong"] == 1 / 8 and p["error"] == 1 / 8
    assert p["truncated"] == 1 / 8 and p["turn_cap"] == 1 / 8
    assert p["not_formatted"] == 5 / 8  # rows 2, 3, 5, 6, 7 (the error row is not counted)
    assert p["tool_error"] == 1 / 8 and p["no_tool"] == 1 / 8
    assert p["mean_turns"] == 2 and p["mean_tokens_out"] == 40
    with Store(ctx.store_path, read_only=True) as store:
        assert failure_profile(store.con, "000000000000")["n"] == 0


@pytest.mark.parametrize("kind", ["not_formatted", "truncated", "turn_cap", "tool_error"])
def test_the_dominant_failure_picks_a_primitive_that_addresses_it(kind):
    import random

    _, primitives = library("math_reasoning")
    profile = {k: 0.0 for k in FAILURES} | {kind: 0.9}
    assert kind in rank(primitives, profile, random.Random(0))[0].addresses


def test_unformatted_incumbent_gets_format_primitives_first(tmp_path):
    hid = harness_id(MATH)
    ctx = context(tmp_path, "math_reasoning", MATH, [rollout(hid, i) for i in range(8)], M=3)
    proposal = OfflineProposer(seed=0).propose(ctx)
    assert proposal.proposer == "offline" and len(proposal.candidates) == 3
    _, primitives = library("math_reasoning")
    by_name = {p.name: p for p in primitives}
    for c in proposal.candidates:
        assert "not_formatted" in by_name[primitive_of(c)].addresses
        assert c.parents == [hid] and c.origin == "offline" and "not formatted 100% of 8" in c.hypothesis
    assert len({c.axis for c in proposal.candidates}) == 3  # one mechanism per axis


def test_same_seed_same_candidates_and_the_seed_breaks_ties(tmp_path):
    hid = harness_id(MATH)
    ctx = context(tmp_path, "math_reasoning", MATH, [rollout(hid, i) for i in range(4)], M=3)
    first = [(c.source, c.hypothesis) for c in OfflineProposer(seed=3).propose(ctx).candidates]
    assert first == [(c.source, c.hypothesis) for c in OfflineProposer(seed=3).propose(ctx).candidates]
    # answer_prefix and format_nudge tie on this profile: some seed orders them the other way
    orders = {tuple(primitive_of(c) for c in OfflineProposer(seed=s).propose(ctx).candidates) for s in range(12)}
    assert len(orders) > 1


@pytest.mark.parametrize("domain", SEEDS)
def test_every_candidate_loads_in_the_sandbox_and_starts_on_a_real_observation(tmp_path, domain):
    data = get_domain(domain, str(tmp_path / "data"))
    data.prepare({"weight": 2, "harness": 2, "test": 2}, seed=0)
    env = data.environment(data.examples("harness")[0])
    observation = env.reset()
    _, primitives = library(domain)
    ctx = context(tmp_path, domain, SEEDS[domain], M=len(primitives))
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    # every primitive applies to a seed, except one_expression, which rewrites a code turn the math
    # seed does not have (it applies to the program harness: test_offline_primitives)
    later = {"one_expression"}
    assert len(candidates) == len([p for p in primitives if p.name not in later])
    assert not later & {primitive_of(c) for c in candidates}
    for c in candidates:
        assert static_violations(c.source) == [], primitive_of(c)
        assert check_source(c.source) is None
        with HarnessSandbox(c.source) as sandbox:
            [(ok, payload)] = sandbox.calls([(0, "start", observation)])
        assert ok, f"{primitive_of(c)}: {payload}"
        prompt = from_wire({k: v for k, v in payload.items() if k not in ("max_turns", "token_budget")})
        assert isinstance(prompt, Prompt) and prompt.messages, primitive_of(c)
    env.close()


@pytest.mark.parametrize("domain,source", [*SEEDS.items(), ("math_reasoning", PROGRAM)])
def test_prompt_only_candidates_differ_only_in_string_constants(tmp_path, domain, source):
    ctx = context(tmp_path, domain, source, M=3, prompt_only=True)
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert len(candidates) == 3
    for c in candidates:
        assert c.axis == "prompt" and c.source != source
        assert masked(c.source) == masked(source)
        assert prompt_only_violation(c.source, source) is None  # the harness phase's own check
        assert check_source(c.source, source) is None
        assert len(c.source.splitlines()) <= len(source.splitlines()) + 3  # one sentence, maybe wrapped


def test_archived_candidates_are_not_proposed_again(tmp_path):
    hid = harness_id(MATH)
    ctx = context(tmp_path, "math_reasoning", MATH, [rollout(hid, i) for i in range(4)], M=2)
    first = OfflineProposer(seed=0).propose(ctx).candidates
    for c in first:
        (ctx.archive_dir / f"{harness_id(c.source)}.py").write_text(c.source)
    second = OfflineProposer(seed=0).propose(ctx).candidates
    assert len(second) == 2
    assert not {c.source for c in first} & {c.source for c in second}
    assert not {primitive_of(c) for c in first} & {primitive_of(c) for c in second}


def test_lineage_components_accumulate_and_are_not_reapplied(tmp_path):
    ctx = context(tmp_path, "search_qa", SEARCH, M=3)
    parent = OfflineProposer(seed=0).propose(ctx).candidates[0]
    tag = primitive_of(parent)
    assert parent.components == [tag]
    child_id = harness_id(parent.source)
    (ctx.archive_dir / f"{child_id}.py").write_text(parent.source)
    with Store(ctx.store_path) as store:
        register(store, child_id, "search_qa", parent.components, parent.parents, origin="offline")
    ctx.incumbent_id = child_id
    children = OfflineProposer(seed=0).propose(ctx).candidates
    assert children
    for c in children:
        assert c.components[:-1] == [tag] and c.components[-1] != tag
        assert applied_tags(c.source) == [tag, c.components[-1]]
        assert c.parents == [child_id] and c.source.startswith(parent.source.rstrip("\n"))


def test_lineage_is_read_from_the_source_when_the_store_lacks_it(tmp_path):
    nudged = edited("math_reasoning", "format_nudge", MATH)
    ctx = context(tmp_path, "math_reasoning", nudged, M=20, registered=False)
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert candidates and all(c.components[0] == "format_nudge" for c in candidates)
    assert "format_nudge" not in [c.components[-1] for c in candidates]


SEARCHED = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<search>q</search>"},
            {"role": "user", "content": "Doc 1 (Title: A) text"}, {"role": "assistant", "content": "A."}]
SILENT = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "A."}]


def _sibling(ctx, domain: str, source: str, rows) -> str:
    """Archive ``source`` as an `ok` offline child of the incumbent with harness-split ``rows``."""
    hid = harness_id(source)
    (ctx.archive_dir / f"{hid}.py").write_text(source)
    with Store(ctx.store_path) as store:
        register(store, hid, domain, applied_tags(source), [ctx.incumbent_id], origin="offline")
        store.insert_rollouts(rows(hid))
    return hid


def test_edits_build_on_a_sibling_that_ties_on_reward_with_fewer_unsolved_failures(tmp_path):
    h0 = harness_id(SEARCH)
    ctx = context(tmp_path, "search_qa", SEARCH, [rollout(h0, i, messages=SILENT) for i in range(4)])
    searching = edited("search_qa", "search_first", SEARCH)
    stone = _sibling(ctx, "search_qa", searching, lambda h: [rollout(h, i, messages=SEARCHED) for i in range(4)])
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert candidates
    for c in candidates:
        assert c.parents == [stone] and f"ties incumbent {h0}" in c.hypothesis
        assert applied_tags(c.source)[0] == "search_first" and c.components[0] == "search_first"


@pytest.mark.parametrize("case", ["lower_reward", "other_weights", "not_ok", "chess_moves_are_not_tools"])
def test_the_incumbent_stays_the_parent(tmp_path, case):
    domain, seed = ("chess_puzzles", CHESS) if case == "chess_moves_are_not_tools" else ("search_qa", SEARCH)
    h0 = harness_id(seed)
    mine = [rollout(h0, i, messages=SILENT, reward=float(case == "lower_reward" and i == 0),
                    formatted=case == "lower_reward" and i == 0) for i in range(4)]
    ctx = context(tmp_path, domain, seed, mine)
    weights = "w1" if case == "other_weights" else "w2"
    other = edited(domain, "search_first" if domain == "search_qa" else "more_retries", seed)
    stone = _sibling(ctx, domain, other, lambda h: [rollout(h, i, weights=weights, messages=SEARCHED)
                                                    for i in range(4)])
    if case == "not_ok":
        with Store(ctx.store_path) as store:
            store.con.execute("UPDATE harnesses SET status = 'error' WHERE harness_id = ?", [stone])
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert candidates and all(c.parents == [h0] for c in candidates)


def test_a_harness_nudge_is_not_tool_use_and_old_stores_fall_back_to_messages(tmp_path):
    hid = harness_id(SEARCH)
    nudged = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "A."},
              {"role": "user", "content": "Now give only the final answer."}, {"role": "assistant", "content": "A."}]
    rows = [rollout(hid, 0, messages=nudged, tool_calls=0), rollout(hid, 1, messages=SEARCHED)]
    ctx = context(tmp_path, "search_qa", SEARCH, rows)
    with Store(ctx.store_path) as store:
        assert failure_profile(store.con, hid)["no_tool"] == 1 / 2
        store.con.execute("UPDATE rollouts SET tool_calls = NULL")  # as written before the column existed
        assert failure_profile(store.con, hid)["no_tool"] == 0
