"""The synthetic encyclopaedia: deterministic, disjoint splits, every answer written down."""
import json

import pytest

from domains import get_domain
from domains.search_qa.generate import build_encyclopaedia
from domains.search_qa.load import load_corpus, split_contents
from domains.search_qa.verify import normalize_answer
from whale.types import SPLITS

SIZES = {"weight": 64, "harness": 16, "test": 16}


@pytest.fixture(scope="module")
def built():
    return build_encyclopaedia(SIZES, seed=0)


def passages_by_id(corpus):
    return {row["id"]: split_contents(row["contents"]) for row in corpus}


def contains(text, name):
    return normalize_answer(name) in normalize_answer(text)


def test_deterministic_per_seed(built):
    corpus, splits = build_encyclopaedia(SIZES, seed=0)
    assert corpus == built[0] and splits == built[1]
    other_corpus, other = build_encyclopaedia(SIZES, seed=1)
    assert other_corpus != corpus
    assert [e.public for e in other["test"]] != [e.public for e in splits["test"]]


def test_sizes_hops_and_modest_corpus(built):
    corpus, splits = built
    assert {s: len(splits[s]) for s in SPLITS} == SIZES
    assert 200 <= len(corpus) <= 2000
    hops = [e.gold["hops"] for s in SPLITS for e in splits[s]]
    assert set(hops) == {1, 2} and abs(hops.count(2) - hops.count(1)) <= 3
    assert len({row["id"] for row in corpus}) == len(corpus)


def test_test_split_does_not_move_with_the_weight_size(built):
    _, bigger = build_encyclopaedia({**SIZES, "weight": 80}, seed=0)
    assert [e.public for e in bigger["test"]] == [e.public for e in built[1]["test"]]


def test_splits_disjoint_in_questions_and_entities(built):
    _, splits = built
    questions = {s: {e.public["question"] for e in splits[s]} for s in SPLITS}
    for s in SPLITS:
        assert len(questions[s]) == SIZES[s], f"duplicate question in {s}"
    # every entity on a question's chain except a bare year belongs to one split only
    entities = {s: {n for e in splits[s] for n in e.gold["chain"] if not n.isdigit()} for s in SPLITS}
    for a, b in (("weight", "harness"), ("weight", "test"), ("harness", "test")):
        assert not questions[a] & questions[b]
        assert not entities[a] & entities[b], (a, b, entities[a] & entities[b])


def test_single_hop_fact_passage_states_the_answer(built):
    corpus, splits = built
    by_id = passages_by_id(corpus)
    single = [e for s in SPLITS for e in splits[s] if e.gold["hops"] == 1]
    assert single
    for ex in single:
        (pid,) = ex.gold["support"]
        title, text = by_id[pid]
        subject, answer = ex.gold["chain"]
        assert contains(title + " " + text, subject), ex
        assert any(contains(text, a) for a in ex.gold["answers"]), (ex, text)
        assert subject in ex.public["question"]


def test_two_hop_chains_are_consistent(built):
    corpus, splits = built
    by_id = passages_by_id(corpus)
    two = [e for s in SPLITS for e in splits[s] if e.gold["hops"] == 2]
    assert two
    for ex in two:
        first, second = (" ".join(by_id[p]) for p in ex.gold["support"])
        subject, bridge, answer = ex.gold["chain"]
        assert subject in ex.public["question"] and bridge not in ex.public["question"]
        assert contains(first, subject) and contains(first, bridge), ex
        assert contains(second, bridge) and contains(second, answer), ex
        assert normalize_answer(answer) in {normalize_answer(a) for a in ex.gold["answers"]}
        # the first hop's passage alone does not give the answer away
        assert not contains(first, answer), ex


def test_names_are_built_from_syllables_and_never_shared(built):
    corpus, splits = built
    titles = {split_contents(r["contents"])[0] for r in corpus}
    people = [e.gold["chain"][0] for s in SPLITS for e in splits[s] if "married to" in e.public["question"]
              and e.gold["hops"] == 1]
    assert people
    for name in people:
        assert name in titles
        given, surname = name.split()
        # a name word names exactly one entity: titles containing it belong to that entity
        assert {t for t in titles if surname in t.split()} == {name}


def test_prepare_writes_corpus_and_splits(tmp_path):
    domain = get_domain("search_qa", str(tmp_path))
    domain.prepare({"weight": 8, "harness": 4, "test": 4}, seed=3)
    files = sorted(p.name for p in (tmp_path / "search_qa").iterdir())
    assert files == ["corpus.jsonl", "harness.jsonl", "test.jsonl", "weight.jsonl"]
    corpus = load_corpus(tmp_path / "search_qa" / "corpus.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "search_qa" / "corpus.jsonl").open()]
    assert set(rows[0]) == {"id", "contents"} and len(corpus) == len(rows)
    assert domain.examples("test") == domain.generate({"weight": 8, "harness": 4, "test": 4}, seed=3)["test"]
