"""The offline proposer as a search: a per-example frontier of the archive, candidates that stack
primitives, cross two frontier harnesses, and mutate constants and prompt sentences."""
from __future__ import annotations

import ast
import random
from collections import Counter

import pytest

from domains import get_domain
from harnesses.contract import HARD_MAX_TURNS
from harnesses.proposers.frontier import draw, frontier
from harnesses.proposers.offline import OPERATORS, OfflineProposer, harness_id
from harnesses.proposers.primitives import NotApplicable, applied_tags, library
from harnesses.proposers.primitives.mutate import (
    drop_sentence,
    drop_sentence_at,
    int_sites,
    mutate_constant,
    neighbours,
)
from harnesses.proposers.variation import compose, crossover, primitive_of_tag
from harnesses.sandbox import HarnessSandbox, static_violations
from harnesses.validate import masked
from tests.offline_support import CHESS, SEARCH, SEEDS, context, edited, register, rollout
from whale.store import Store


def test_the_frontier_keeps_who_leads_some_example_and_drops_the_dominated():
    means = {"a": {"e1": 1.0, "e2": 0.0, "e3": 0.0}, "b": {"e1": 0.0, "e2": 1.0, "e3": 0.0},
             "c": {"e1": 1.0, "e2": 0.0, "e3": 0.0}, "d": {"e1": 0.5, "e2": 0.5, "e3": 0.0}}
    assert frontier(means) == {"a": {"e1"}, "b": {"e2"}, "c": {"e1"}}  # e3: nobody solves it
    means["e"] = {"e1": 1.0, "e2": 1.0}
    assert frontier(means) == {"e": {"e1", "e2"}}
    assert frontier({"a": {"e1": 0.0}}) == {}


def test_parents_are_drawn_in_proportion_to_the_examples_they_lead():
    front = {"a": frozenset({"e1", "e2", "e3"}), "b": frozenset({"e4"})}
    rng = random.Random(0)
    drawn = Counter(draw(front, rng) for _ in range(2000))
    assert 0.7 < drawn["a"] / 2000 < 0.8
    assert draw(front, rng, exclude=("a",)) == "b" and draw(front, rng, exclude=("a", "b")) is None


@pytest.mark.parametrize("domain", SEEDS)
def test_a_constant_mutation_changes_one_integer_to_a_neighbour_and_still_loads(domain):
    source = SEEDS[domain]
    before = {(s.name, s.node.lineno): s.value for s in int_sites(source)}
    assert before
    for seed in range(6):
        edit = mutate_constant(source, random.Random(seed))
        after = {(s.name, s.node.lineno): s.value for s in int_sites(edit.source)}
        changed = [k for k in before if after[k] != before[k]]
        assert len(changed) == 1 and after[changed[0]] in neighbours(changed[0][0], before[changed[0]])
        assert applied_tags(edit.source) == [edit.tag] and static_violations(edit.source) == []
        with HarnessSandbox(edit.source):
            pass
    assert max(neighbours("max_turns", HARD_MAX_TURNS)) == HARD_MAX_TURNS - 1  # never past the cap
    with pytest.raises(NotApplicable):
        mutate_constant(source, random.Random(0), exclude=tuple(
            f"set_{n}_{v}" for (n, _), old in before.items() for v in neighbours(n, old)))


def test_a_dropped_sentence_is_prompt_text_only_and_keeps_the_answer_format():
    edit = drop_sentence(CHESS, random.Random(1), "<move>")
    assert masked(edit.source) == masked(CHESS) and edit.source != CHESS
    system = next(n.value for n in ast.walk(ast.parse(edit.source)) if isinstance(n, ast.Assign)
                  and getattr(n.targets[0], "id", "") == "SYSTEM")
    assert system.value.count("\n") == 1  # three sentences, two left
    assert "<move></move>" in edit.source and applied_tags(edit.source) == [edit.tag]


def test_a_dropped_sentence_is_replayed_from_its_tag_alone():
    for seed in range(6):
        drawn = drop_sentence(SEARCH, random.Random(seed), "<answer>")
        assert drop_sentence_at(SEARCH, drawn.tag, "<answer>") == drawn
    line, n = map(int, drawn.tag.split("_")[1:])
    for wrong in (f"drop_{line + 1}_{n}", f"drop_{line}_{n + 9}", "drop_x", "set_max_turns_4"):
        with pytest.raises(NotApplicable):
            drop_sentence_at(SEARCH, wrong, "<answer>")


def test_a_found_harness_is_rebuilt_from_a_lineage_with_mutations():
    from bench.reward_guards import rebuild

    info, primitives = library("search_qa")
    drawn = drop_sentence(SEARCH, random.Random(0), info.marker)
    first = next(p for p in primitives if p.name == "search_first")
    expected = first.apply(drawn.source, info).source
    assert rebuild("search_qa", [drawn.tag, "search_first"]) == expected
    assert applied_tags(expected) == [drawn.tag, "search_first"]
    with pytest.raises(ValueError, match="no primitive 'nonsense'"):
        rebuild("search_qa", ["nonsense"])


def test_compose_stacks_two_primitives_of_different_axes():
    info, primitives = library("chess_puzzles")
    v = compose(CHESS, list(primitives), info, lineage=[])
    assert len(v.tags) == 2 and applied_tags(v.source) == v.tags
    first, second = (primitive_of_tag(t, primitives) for t in v.tags)
    assert first.axis != second.axis
    assert compose(CHESS, list(primitives[:1]), info, lineage=[]) is None  # one primitive is no composition


def test_crossover_adds_the_other_parents_mechanisms_it_lacks():
    info, primitives = library("chess_puzzles")
    a = edited("chess_puzzles", "more_retries", CHESS)
    v = crossover(a, ["more_retries"], ["board_diagram", "more_retries", "set_turn_tokens_128"], primitives, info)
    assert v.tags == ["board_diagram", "set_turn_tokens_128"]
    assert set(applied_tags(v.source)) == {"more_retries", "board_diagram", "set_turn_tokens_128"}
    assert "turn_tokens = 128" in v.source
    assert crossover(a, ["more_retries"], ["more_retries"], primitives, info) is None


def _archived(ctx, source: str, leads: list[int], n: int = 4) -> str:
    """Archive ``source`` as an `ok` offline harness that solves the harness-split examples ``leads``."""
    hid = harness_id(source)
    (ctx.archive_dir / f"{hid}.py").write_text(source)
    with Store(ctx.store_path) as store:
        register(store, hid, ctx.domain, applied_tags(source), [ctx.incumbent_id], origin="offline")
        store.insert_rollouts([rollout(hid, i, reward=float(i in leads), formatted=True) for i in range(n)])
    return hid


def test_crossover_candidates_have_two_frontier_parents(tmp_path):
    h0 = harness_id(SEARCH)
    ctx = context(tmp_path, "search_qa", SEARCH, [rollout(h0, i, formatted=True) for i in range(4)], M=2)
    a = _archived(ctx, edited("search_qa", "top_k_3", SEARCH), [0, 1])
    b = _archived(ctx, edited("search_qa", "retrieved_titles", SEARCH), [2])
    candidates = OfflineProposer(seed=0, operators=("crossover",)).propose(ctx).candidates
    crossed = [c for c in candidates if len(c.parents) == 2]
    assert len(candidates) == 2 and len(crossed) == 1
    (c,) = crossed
    assert set(c.parents) == {a, b} and {"top_k_3", "retrieved_titles"} <= set(applied_tags(c.source))
    assert c.hypothesis.startswith("crossover of ") and "frontier: best on" in c.hypothesis


@pytest.mark.parametrize("domain", SEEDS)
def test_every_operator_gives_a_candidate_that_starts_on_a_real_observation(tmp_path, domain):
    data = get_domain(domain, str(tmp_path / "data"))
    data.prepare({"weight": 0, "harness": 2, "test": 0}, seed=0)
    env = data.environment(data.examples("harness")[0])
    observation = env.reset()
    h0 = harness_id(SEEDS[domain])
    ctx = context(tmp_path, domain, SEEDS[domain], [rollout(h0, i) for i in range(4)], M=4)
    _archived(ctx, edited(domain, "format_nudge", SEEDS[domain]), [0])
    _archived(ctx, edited(domain, "brevity", SEEDS[domain]), [1])
    proposer = OfflineProposer(seed=0, operators=OPERATORS)
    proposal = proposer.propose(ctx)
    assert [c.source for c in proposal.candidates] == [c.source for c in proposer.propose(ctx).candidates]
    kinds = Counter(c.hypothesis.split(" ")[0] for c in proposal.candidates)
    kinds = {k for k in kinds if k in OPERATORS}
    assert len(proposal.candidates) == 4 and kinds == set(OPERATORS), [c.hypothesis for c in proposal.candidates]
    assert len({c.source for c in proposal.candidates}) == 4
    for c in proposal.candidates:
        assert static_violations(c.source) == [] and c.components[-1] in applied_tags(c.source) + c.components
        with HarnessSandbox(c.source) as sandbox:
            [(ok, payload)] = sandbox.calls([(0, "start", observation)])
        assert ok, f"{c.hypothesis}: {payload}"
    env.close()


@pytest.mark.parametrize("domain", SEEDS)
def test_prompt_only_operators_change_prompt_text_only(tmp_path, domain):
    h0 = harness_id(SEEDS[domain])
    ctx = context(tmp_path, domain, SEEDS[domain], [rollout(h0, i) for i in range(4)], M=4, prompt_only=True)
    candidates = OfflineProposer(seed=0, operators=OPERATORS).propose(ctx).candidates
    assert candidates
    for c in candidates:
        assert masked(c.source) == masked(SEEDS[domain]) and c.source != SEEDS[domain]


def test_unknown_operators_are_refused():
    with pytest.raises(ValueError, match="unknown offline operators"):
        OfflineProposer(operators=("splice",))


def test_a_phase_revives_the_previous_weights_best_frontier_harnesses(tmp_path):
    from harnesses.proposers.frontier import revivals

    h0 = harness_id(SEARCH)
    old = [rollout(h0, i, weights="w1", cycle=0, reward=float(i == 0), formatted=True) for i in range(4)]
    ctx = context(tmp_path, "search_qa", SEARCH, old + [rollout(h0, i) for i in range(4)])
    wide = edited("search_qa", "top_k_3", SEARCH)
    titles = edited("search_qa", "retrieved_titles", SEARCH)
    for source, leads in ((wide, [1, 2]), (titles, [3])):
        hid = harness_id(source)
        (ctx.archive_dir / f"{hid}.py").write_text(source)
        with Store(ctx.store_path) as store:
            register(store, hid, "search_qa", applied_tags(source), [h0], origin="offline")
            store.insert_rollouts([rollout(hid, i, weights="w1", cycle=0, reward=float(i in leads), formatted=True)
                                   for i in range(4)])
    with Store(ctx.store_path) as store:
        assert revivals(store.con, "w2", h0, 1) == [harness_id(wide)]  # the best mean of the old frontier
        assert revivals(store.con, "w2", h0, 5) == [harness_id(wide), harness_id(titles)]  # h0 is incoming
        assert revivals(store.con, "w2", h0, 0) == []
        assert revivals(store.con, "w1", h0, 2) == []  # under w2 nothing scores above 0: no frontier
