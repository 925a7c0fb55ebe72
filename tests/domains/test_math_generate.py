"""The synthetic math generator: deterministic, sized, disjoint, with correct gold answers."""
from __future__ import annotations

import re

import pytest

from domains.math_reasoning import MathDomain, make_domain
from domains.math_reasoning.generate import generate, normalise

SIZES = {"weight": 40, "harness": 12, "test": 12}


def test_same_seed_same_splits_and_other_seed_differs():
    a, b, c = generate(SIZES, seed=0), generate(SIZES, seed=0), generate(SIZES, seed=1)
    assert a == b
    assert [e.public for e in a["test"]] != [e.public for e in c["test"]]


def test_sizes_ids_and_fields():
    splits = generate(SIZES, seed=3)
    assert list(splits) == ["weight", "harness", "test"]
    for split, examples in splits.items():
        assert len(examples) == SIZES[split]
        assert [e.id for e in examples] == [f"math-{split}-{i}" for i in range(SIZES[split])]
        for e in examples:
            assert e.split == split
            assert set(e.public) == {"question"} and set(e.gold) == {"answer"}
            assert type(e.gold["answer"]) is int


def test_splits_are_disjoint_on_normalised_text():
    splits = generate({"weight": 300, "harness": 60, "test": 60}, seed=0)
    keys = {split: {normalise(e.public["question"]) for e in exs} for split, exs in splits.items()}
    assert all(len(keys[s]) == len(splits[s]) for s in splits)  # no repeats inside a split either
    assert not keys["weight"] & keys["harness"]
    assert not keys["weight"] & keys["test"]
    assert not keys["harness"] & keys["test"]


def test_held_out_splits_do_not_move_when_weight_grows():
    small = generate({"weight": 5, "harness": 8, "test": 8}, seed=2)
    large = generate({"weight": 80, "harness": 8, "test": 8}, seed=2)
    assert small["test"] == large["test"] and small["harness"] == large["harness"]


def test_gold_answers_match_an_independent_computation():
    checked = 0
    for e in generate({"test": 200}, seed=5)["test"]:
        q, gold = e.public["question"], e.gold["answer"]
        nums = [int(n) for n in re.findall(r"\d+", q)]
        if "^" in q and "+" not in q:
            b, ex, m = nums
            assert gold == pow(b, ex, m)
            checked += 1
        elif "multiplied by" in q or "product" in q:
            assert gold == nums[0] * nums[1]
            checked += 1
        elif "divisible by" in q and "or by" in q:
            n, a, b = nums[-3:]
            assert gold == sum(1 for i in range(1, n + 1) if i % a == 0 or i % b == 0)
            checked += 1
    assert checked >= 20


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="unknown split"):
        generate({"train": 3}, seed=0)
    with pytest.raises(ValueError, match="non-negative int"):
        generate({"weight": -1}, seed=0)


def test_prepare_writes_readable_splits(tmp_path):
    domain = make_domain(tmp_path)
    assert isinstance(domain, MathDomain) and domain.name == "math_reasoning"
    domain.prepare({"weight": 6, "harness": 2, "test": 2}, seed=0)
    assert (tmp_path / "math_reasoning" / "weight.jsonl").exists()
    assert domain.examples("test") == generate({"weight": 6, "harness": 2, "test": 2}, seed=0)["test"]


def test_every_split_covers_the_templates_evenly(monkeypatch):
    """Each run of len(TEMPLATES) problems holds every template once, so small splits are balanced."""
    from domains.math_reasoning import generate as gen

    made: dict[str, str] = {}

    def tagged(template):
        def draw(rng):
            key, question, answer = template(rng)
            made[question] = key[0]
            return key, question, answer
        return draw

    monkeypatch.setattr(gen, "TEMPLATES", tuple(tagged(t) for t in gen.TEMPLATES))
    n = len(gen.TEMPLATES)
    for split, examples in gen.generate({"weight": 4 * n, "harness": 2 * n + 3, "test": 8 * n}, seed=0).items():
        kinds = [made[e.public["question"]] for e in examples]
        for start in range(0, len(kinds) - n + 1, n):
            assert len(set(kinds[start:start + n])) == n, (split, start, kinds[start:start + n])
