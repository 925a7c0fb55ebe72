"""The search tool: BM25 over the shared corpus, argument checks, clamps, errors as observations."""
import pytest

from domains import get_domain
from domains.search_qa.environment import BM25Index, tokenize
from harnesses.contract import Call
from whale.types import SPLITS, Example


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    d = get_domain("search_qa", str(tmp_path_factory.mktemp("data")))
    d.prepare({"weight": 64, "harness": 16, "test": 16}, seed=0)
    return d


@pytest.fixture
def env(domain):
    e = domain.environment(domain.examples("test")[0])
    e.reset()
    return e


def search(env, **args):
    return env.step(Call("search", args)).data


def test_tokenize_drops_case_punctuation_and_stopwords():
    assert tokenize("Where was Tavel Orimund's WIFE born, in 1850?") == ["tavel", "orimund", "wife", "born", "1850"]


def test_entity_name_finds_its_own_passage(domain):
    index = domain.index.get()
    for split in SPLITS:
        for ex in domain.examples(split):
            subject = ex.gold["chain"][0]
            hits = index.search(subject, 1)
            assert hits and hits[0]["title"] == subject, (subject, hits)


def test_single_hop_question_retrieves_its_fact_passage(domain):
    index = domain.index.get()
    single = [ex for ex in domain.examples("weight") if ex.gold["hops"] == 1]
    found = sum(ex.gold["support"][0] in [p["id"] for p in index.search(ex.public["question"], 3)] for ex in single)
    assert found == len(single)


def test_observation_shape_and_final_state(env):
    obs = search(env, query="Which river flows", top_k=2, max_chars=30)
    assert set(obs) == {"tool", "passages", "error"} and obs["tool"] == "search" and obs["error"] is None
    assert len(obs["passages"]) == 2
    assert all(set(p) == {"title", "text"} and len(p["text"]) <= 30 for p in obs["passages"])
    search(env, query="  market week  ")
    state = env.final_state()
    assert state["searches"] == ["Which river flows", "market week"]
    assert [len(r) for r in state["retrieved"]] == [2, 3]


@pytest.mark.parametrize("top_k, expected", [(0, 1), (-5, 1), (3, 3), (50, 10)])
def test_top_k_is_clamped(env, top_k, expected):
    assert len(search(env, query="town river", top_k=top_k)["passages"]) == expected


def test_max_chars_is_clamped_and_titles_are_never_cut(env):
    long = search(env, query="town river", top_k=1, max_chars=10**6)["passages"][0]
    short = search(env, query="town river", top_k=1, max_chars=0)["passages"][0]
    assert len(short["text"]) == 1 and short["title"] == long["title"] and long["text"].startswith(short["text"])


@pytest.mark.parametrize("call, needle", [
    (Call("search", {"query": "   "}), "non-empty"),
    (Call("search", {}), "non-empty"),
    (Call("search", {"query": 3}), "non-empty"),
    (Call("search", {"query": "x", "top_k": "3"}), "top_k must be an integer"),
    (Call("search", {"query": "x", "top_k": True}), "top_k must be an integer"),
    (Call("search", {"query": "x", "max_chars": 1.5}), "max_chars must be an integer"),
    (Call("search", {"query": "x", "k": 3}), "unknown argument"),
    (Call("python", {"code": "1"}), "unknown tool 'python'"),
])
def test_errors_come_back_as_observations(env, call, needle):
    obs = env.step(call)
    assert not obs.done and obs.data["passages"] == [] and needle in obs.data["error"]
    assert obs.data["error"].startswith(call.tool)
    assert env.final_state()["searches"] == []


def test_no_match_gives_no_passages(env):
    assert search(env, query="the of and")["passages"] == []
    assert search(env, query="zzzqqq")["passages"] == []


def test_index_built_once_per_domain(domain):
    a = domain.environment(domain.examples("weight")[0])
    b = domain.environment(domain.examples("test")[1])
    assert a.index is b.index is domain.index.get()
    assert a.reset() == {"question": domain.examples("weight")[0].public["question"]}


def test_missing_corpus_is_a_clear_error(tmp_path):
    d = get_domain("search_qa", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="corpus.jsonl is missing"):
        d.environment(Example("e", "test", {"question": "q"}, {"answers": ["a"], "hops": 1}))


def test_ties_go_to_the_earlier_passage():
    index = BM25Index([{"id": "1", "title": "A", "text": "river"}, {"id": "2", "title": "B", "text": "river"}])
    assert [p["id"] for p in index.search("river", 2)] == ["1", "2"]
