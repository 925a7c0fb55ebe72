"""The offline proposer asks the run's replay check (whale/run/dedupe.py) before it offers an edit:
one that would replay its parent's recorded episodes unchanged gives its slot to the next.

Search QA's seed under random text never searches, so an edit that acts on retrieved passages (a
choice among their spans) changes no episode: the case that cost search runs their slots."""
from __future__ import annotations

import dataclasses

import pytest

from harnesses.proposers.offline import OfflineProposer, harness_id
from tests.offline_support import SEARCH, context
from tests.support.replay import as_recorded, harness_split_domain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine
from whale.rollout.metrics import summarize
from whale.run.dedupe import same_behaviour
from whale.run.settings import load_settings
from whale.testing import ROOT

M = 3


@pytest.fixture(scope="module")
def sqa(tmp_path_factory):
    return harness_split_domain("search_qa", tmp_path_factory)


@pytest.fixture(scope="module")
def recorded(sqa, tokenizer):
    """The seed's harness-split episodes under random text, as the run stores them."""
    out = Engine(NullBackend(tokenizer), sqa, Sampling()).run(SEARCH, sqa.examples("harness"), 1, seed=3,
                                                               progress=False)
    assert summarize(out)["n"] == 6
    return [dataclasses.replace(r, run_id="r1", cycle=1, phase="harness", step=1, split="harness",
                                harness_id=harness_id(SEARCH), weights_id="w2") for r in out]


def replay_check(sqa, tokenizer, recorded, asked: list[str]):
    settings = load_settings(ROOT / "params.yaml", None, {}, "search_qa")
    episodes = as_recorded(recorded)

    def duplicate(source: str, parent: str) -> bool:
        assert parent == harness_id(SEARCH)
        asked.append(harness_id(source))
        return same_behaviour(settings, sqa, tokenizer, source, SEARCH, episodes)
    return duplicate


def test_an_edit_that_replays_its_parent_gives_its_slot_to_the_next(tmp_path, sqa, tokenizer, recorded):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    asked: list[str] = []
    duplicate = replay_check(sqa, tokenizer, recorded, asked)
    unchecked = OfflineProposer(seed=0).propose(context(tmp_path / "a", "search_qa", SEARCH, recorded, M=M))
    wasted = [c for c in unchecked.candidates if duplicate(c.source, harness_id(SEARCH))]
    # the case this is about: without the check a slot goes to an edit the run would reject unevaluated
    assert wasted and len(unchecked.candidates) == M

    ctx = context(tmp_path / "b", "search_qa", SEARCH, recorded, M=M)
    asked.clear()
    ctx.duplicate = duplicate
    checked = OfflineProposer(seed=0).propose(ctx)
    ids = [harness_id(c.source) for c in checked.candidates]
    assert len(ids) == M and not any(duplicate(c.source, harness_id(SEARCH)) for c in checked.candidates)
    # the slots went to the next edits, and the check was asked only of edits up for a slot
    assert {harness_id(c.source) for c in wasted}.isdisjoint(ids)
    assert set(ids) - {harness_id(c.source) for c in unchecked.candidates}
    assert M <= len(asked) < M + 3 * len(wasted) + 4


def test_without_the_check_nothing_changes(tmp_path, recorded):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    ctx = context(tmp_path / "a", "search_qa", SEARCH, recorded, M=M)
    assert ctx.duplicate is None
    again = context(tmp_path / "b", "search_qa", SEARCH, recorded, M=M)
    again.duplicate = lambda source, parent: False
    assert ([c.source for c in OfflineProposer(seed=0).propose(ctx).candidates]
            == [c.source for c in OfflineProposer(seed=0).propose(again).candidates])


def test_an_llm_proposer_hears_that_its_candidate_replays_its_parent(tmp_path, sqa, tokenizer, recorded):
    """The LLM proposers' write_candidate asks the same check: a replaying candidate is refused
    while the proposer can still change it, one that acts is taken."""
    from harnesses.proposers.claude_tools import ToolError, Workbench
    from tests.offline_support import edited

    asked: list[str] = []
    ctx = context(tmp_path, "search_qa", SEARCH, recorded, M=M)
    ctx.duplicate = replay_check(sqa, tokenizer, recorded, asked)
    bench = Workbench(ctx, view=None)
    spans = edited("search_qa", "answer_spans", SEARCH)  # acts on passages the seed never retrieves
    first = edited("search_qa", "search_first", SEARCH)  # every episode searches
    with pytest.raises(ToolError, match=f"replays the recorded harness-split episodes of its parent "
                                        f"{harness_id(SEARCH)}"):
        bench.tool_write_candidate(spans, "choose among spans", "parsing", ["answer_spans"])
    assert bench.tool_write_candidate(first, "search before answering", "tool_args", ["search_first"]).startswith(
        "candidate 1 accepted")
    assert asked == [harness_id(spans), harness_id(first)]
