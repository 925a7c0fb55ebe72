"""Real formats: Search-R1 question parquet and wiki-18 JSONL corpora, written here as fixtures."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from domains import get_domain
from domains.search_qa.load import import_real, load_corpus, load_questions, split_contents
from harnesses.contract import Call


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_golden_answers_format(tmp_path):
    path = write_parquet(tmp_path / "q.parquet", [
        {"id": "nq_1", "question": "who wrote x? ", "golden_answers": ["Ann Bo", "Bo"], "data_source": "nq"},
        {"id": "hp_2", "question": "where was y born", "golden_answers": ["Zed"], "data_source": "hotpotqa"},
    ])
    a, b = load_questions(path, "test")
    assert (a.id, a.split, a.public, a.gold) == ("search_qa-test-nq_1", "test", {"question": "who wrote x?"},
                                                {"answers": ["Ann Bo", "Bo"], "hops": 1})
    assert b.gold["hops"] == 2


def test_verl_format(tmp_path):
    row = {"data_source": "musique", "extra_info": {"question": "q1?", "index": 7},
           "reward_model": {"ground_truth": {"target": ["A", "B"]}, "style": "rule"}}
    path = write_parquet(tmp_path / "verl.parquet", [row])
    (ex,) = load_questions(path, "weight")
    assert ex.id == "search_qa-weight-7" and ex.public == {"question": "q1?"}
    assert ex.gold == {"answers": ["A", "B"], "hops": 2}


@pytest.mark.parametrize("bad, needle", [
    ({"question": "", "golden_answers": ["a"]}, "no question text"),
    ({"question": "q", "golden_answers": []}, "non-empty list"),
    ({"question": "q", "golden_answers": ["a", " "]}, "non-empty list"),
    ({"question": "q", "golden_answers": None}, "non-empty list"),
])
def test_malformed_question_rows_name_the_row(tmp_path, bad, needle):
    good = {"question": "fine", "golden_answers": ["x"]}
    path = write_parquet(tmp_path / "bad.parquet", [good, good | {"question": "also fine"}, bad])
    with pytest.raises(ValueError, match=rf"bad\.parquet: row 2: .*{needle}"):
        load_questions(path, "test")


def test_duplicate_question_ids_refused(tmp_path):
    path = write_parquet(tmp_path / "dup.parquet", [{"id": "1", "question": "a", "golden_answers": ["x"]},
                                                    {"id": "1", "question": "b", "golden_answers": ["y"]}])
    with pytest.raises(ValueError, match="row 1: duplicate id"):
        load_questions(path, "test")


def test_corpus_wiki18_format(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        json.dumps({"id": "0", "contents": '"Aaron"\nAaron is a prophet.'}),
        "",
        json.dumps({"id": 1, "contents": "Plain Title\nline one\nline two"}),
    ])
    assert load_corpus(path) == [{"id": "0", "title": "Aaron", "text": "Aaron is a prophet."},
                                 {"id": "1", "title": "Plain Title", "text": "line one\nline two"}]
    assert split_contents("title only") == ("title only", "")


@pytest.mark.parametrize("bad, needle", [
    ("{not json", "not JSON"),
    (json.dumps({"id": "9"}), "needs 'id' and a string 'contents'"),
    (json.dumps({"contents": "t\nx"}), "needs 'id'"),
    (json.dumps(["a"]), "needs 'id'"),
    (json.dumps({"id": "0", "contents": "dup\nx"}), "duplicate passage id"),
])
def test_malformed_corpus_lines_name_the_line(tmp_path, bad, needle):
    path = write_jsonl(tmp_path / "c.jsonl", [json.dumps({"id": "0", "contents": "t\nx"}), "", bad])
    with pytest.raises(ValueError, match=rf"c\.jsonl:3: .*{needle}"):
        load_corpus(path)


def test_import_real_installs_searchable_data(tmp_path):
    corpus = write_jsonl(tmp_path / "wiki.jsonl", [
        json.dumps({"id": "1", "contents": '"Brasko"\nThe Velum River flows through Brasko.'}),
        json.dumps({"id": "2", "contents": '"Orimund"\nOrimund was born in Tavia.'}),
    ])
    weight = write_parquet(tmp_path / "w.parquet",
                           [{"question": "where was Orimund born", "golden_answers": ["Tavia"]}])
    test = write_parquet(tmp_path / "t.parquet", [{"question": "which river flows through Brasko",
                                                   "golden_answers": ["Velum"]}])
    domain = get_domain("search_qa", str(tmp_path / "data"))
    import_real(domain.data_dir, corpus, {"weight": weight, "test": test})
    ex = domain.examples("test")[0]
    env = domain.environment(ex)
    env.reset()
    obs = env.step(Call("search", {"query": ex.public["question"], "top_k": 1})).data
    assert obs["passages"] == [{"title": "Brasko", "text": "The Velum River flows through Brasko."}]


def test_import_real_refuses_overlapping_splits(tmp_path):
    corpus = write_jsonl(tmp_path / "wiki.jsonl", [json.dumps({"id": "1", "contents": "T\nx"})])
    rows = [{"question": "Same  question?", "golden_answers": ["x"]}]
    a = write_parquet(tmp_path / "a.parquet", rows)
    b = write_parquet(tmp_path / "b.parquet", [{"question": "same question?", "golden_answers": ["x"]}])
    with pytest.raises(ValueError, match="both weight and harness"):
        import_real(tmp_path / "out", corpus, {"weight": a, "harness": b})
    assert not (tmp_path / "out").exists()
