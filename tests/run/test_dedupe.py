"""A candidate that replays its parent's recorded episodes token for token is a duplicate; any
change a rollout could show (prompt text, a token limit, a turn cap) makes it a different one."""
from __future__ import annotations

import pytest

from tests.support.chess import LineBackend
from tests.support.replay import as_recorded, harness_split_domain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.null import NullBackend
from whale.rollout.backends.recorded import RecordedBackend, replies
from whale.rollout.engine import Engine
from whale.run.dedupe import same_behaviour
from whale.run.settings import load_settings
from whale.testing import ROOT

SEED = (ROOT / "harnesses" / "seeds" / "chess_puzzles.py").read_text()


@pytest.fixture(scope="module")
def chess(tmp_path_factory):
    return harness_split_domain("chess_puzzles", tmp_path_factory)


@pytest.fixture(scope="module")
def settings():
    return load_settings(ROOT / "params.yaml", None, {}, "chess_puzzles")


def record(domain, backend) -> list[dict]:
    """The parent's harness-split episodes as the store keeps them."""
    return as_recorded(Engine(backend, domain, Sampling()).run(SEED, domain.examples("harness"), 1, seed=3,
                                                               progress=False))


@pytest.fixture(scope="module", params=["solver", "random"])
def recorded(request, chess, tokenizer):
    solver = request.param == "solver"
    backend = LineBackend(tokenizer, chess.examples("harness")) if solver else NullBackend(tokenizer)
    return record(chess, backend)


def edited(old: str, new: str) -> str:
    assert old in SEED
    return SEED.replace(old, new)


def test_replies_are_the_generated_runs_after_their_contexts():
    assert replies([1, 2, 3, 4, 5, 6], [0, 1, 1, 0, 1, 0]) == [((1,), (2, 3)), ((1, 2, 3, 4), (5,))]


def test_an_off_record_context_is_a_divergence(tokenizer):
    from whale.rollout.backends.base import GenRequest

    backend = RecordedBackend(tokenizer, [([5, 6, 7], [0, 1, 1])])
    hit, miss = backend.generate([GenRequest([5], 4, 0), GenRequest([9], 4, 0)], Sampling())
    assert hit.ids == [6, 7] and backend.divergences == 1 and miss.ids == [tokenizer.eos_token_id]


def test_a_cosmetic_edit_is_a_duplicate(chess, tokenizer, settings, recorded):
    cosmetic = edited("def render(observation):", "# the board as text\ndef render(observation):")
    assert same_behaviour(settings, chess, tokenizer, cosmetic, SEED, recorded)
    assert same_behaviour(settings, chess, tokenizer, SEED, SEED, recorded)


@pytest.mark.parametrize("change", [
    ("with no explanation.", "with no explanation at all."),  # prompt text
    ("turn_tokens = 64", "turn_tokens = 96"),  # the model may write longer: same contexts, other request
])
def test_a_change_a_rollout_can_show_is_not(chess, tokenizer, settings, recorded, change):
    assert not same_behaviour(settings, chess, tokenizer, edited(*change), SEED, recorded)


def test_a_retry_counts_where_the_record_retried_and_only_there(chess, tokenizer, settings):
    """Random text holds no move, so the seed asks again; the solver never needs to."""
    no_retry = edited("self.format_retries = 1", "self.format_retries = 0")
    random_record = record(chess, NullBackend(tokenizer))
    solver_record = record(chess, LineBackend(tokenizer, chess.examples("harness")))
    assert not same_behaviour(settings, chess, tokenizer, no_retry, SEED, random_record)
    assert same_behaviour(settings, chess, tokenizer, no_retry, SEED, solver_record)


def test_the_solver_record_sees_a_turn_cap(chess, tokenizer, settings):
    solved = record(chess, LineBackend(tokenizer, chess.examples("harness")))
    assert any(r["reward"] > 0 for r in solved)
    multi = any(len(replies(r["token_ids"], r["mask"])) > 1 for r in solved)
    capped = edited("max_turns = 9", "max_turns = 1")
    assert same_behaviour(settings, chess, tokenizer, capped, SEED, solved) is not multi


def test_a_record_the_parent_does_not_replay_makes_no_duplicate(chess, tokenizer, settings, recorded):
    tampered = [dict(r, reward=1.0 - (r["reward"] or 0.0)) for r in recorded]
    assert not same_behaviour(settings, chess, tokenizer, SEED, SEED, tampered)
    assert not same_behaviour(settings, chess, tokenizer, SEED, SEED, [])
