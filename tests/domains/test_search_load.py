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


def test_import_real_keeps_a_shared_question_only_in_the_held_out_split(tmp_path):
    corpus = write_jsonl(tmp_path / "wiki.jsonl", [json.dumps({"id": "1", "contents": "T\nx"})])
    a = write_parquet(tmp_path / "a.parquet", [{"question": "Same  question?", "golden_answers": ["x"]},
                                               {"question": "other", "golden_answers": ["y"]}])
    b = write_jsonl(tmp_path / "b.jsonl", [json.dumps({"question": "same question?", "golden_answers": ["x"]})])
    t = write_jsonl(tmp_path / "t.jsonl", [json.dumps({"question": "third", "golden_answers": ["z"]})])
    out = tmp_path / "out"
    assert import_real(out, corpus, {"weight": a, "harness": b, "test": t}) == {"test": 1, "harness": 1, "weight": 1}
    assert "other" in (out / "weight.jsonl").read_text()
    # a split that would be left empty is refused before anything is written
    with pytest.raises(ValueError, match="weight would be empty"):
        import_real(tmp_path / "out2", corpus, {"weight": b, "harness": b, "test": t})
    assert not (tmp_path / "out2").exists()


def test_questions_in_jsonl_get_the_ids_of_their_parquet_copy(tmp_path):
    rows = [{"question": f"q{i}?", "golden_answers": [f"a{i}"]} for i in range(3)]
    parquet = load_questions(write_parquet(tmp_path / "q.parquet", rows), "test")
    jsonl = load_questions(write_jsonl(tmp_path / "q.jsonl", ["", *map(json.dumps, rows)]), "test")
    assert [e.id for e in jsonl] == [e.id for e in parquet] == [f"search_qa-test-{i}" for i in range(3)]
    assert [e.gold for e in jsonl] == [e.gold for e in parquet]
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 2: a row must be an object"):
        load_questions(write_jsonl(tmp_path / "bad.jsonl", [json.dumps(rows[0]), "[1]"]), "test")


@pytest.mark.parametrize("where", ["hops", "extra_info", "metadata"])
def test_a_hops_column_is_read(tmp_path, where):
    row = {"question": "q?", "golden_answers": ["a"], "data_source": "nq"}
    row |= {"hops": 3} if where == "hops" else {where: {"hops": "3"}}
    (ex,) = load_questions(write_parquet(tmp_path / "q.parquet", [row]), "test")
    assert ex.gold["hops"] == 3
    with pytest.raises(ValueError, match=r"row 0: hops must be a positive integer, got 0"):
        load_questions(write_parquet(tmp_path / "z.parquet", [{**row, "hops": 0}]), "test")


def test_wiki18_title_repeated_at_the_start_of_the_text_is_dropped_once():
    assert split_contents('"Aaron"\nAaron Aaron ( or ; "Ahärôn") is a prophet.') == \
        ("Aaron", 'Aaron ( or ; "Ahärôn") is a prophet.')
    assert split_contents('"Aaron"\nAaron is a prophet.') == ("Aaron", "Aaron is a prophet.")
    assert split_contents('"Ann Bo"\nAnn Bo Ann Bo (born 1950)') == ("Ann Bo", "Ann Bo (born 1950)")


def test_a_test_file_alone_is_enough_the_other_splits_are_drawn_from_it(tmp_path):
    corpus = write_jsonl(tmp_path / "wiki.jsonl", [json.dumps({"id": "1", "contents": "T\nx"})])
    rows = [{"question": f"question {i}?", "golden_answers": [f"a{i}"]} for i in range(10)]
    test = write_jsonl(tmp_path / "test.jsonl", [json.dumps(r) for r in rows])
    out = tmp_path / "out"
    sizes = {"weight": 3, "harness": 2, "test": 64}
    assert import_real(out, corpus, {"test": test}, sizes, seed=1) == {"test": 5, "harness": 2, "weight": 3}
    domain = get_domain("search_qa", str(tmp_path))
    domain.data_dir = out
    splits = {s: domain.examples(s) for s in ("weight", "harness", "test")}
    questions = [e.public["question"] for s in splits.values() for e in s]
    assert sorted(questions) == sorted(r["question"] for r in rows)  # disjoint, nothing lost
    assert all(e.id.startswith(f"search_qa-{s}-") for s, exs in splits.items() for e in exs)
    again = tmp_path / "again"
    import_real(again, corpus, {"test": test}, sizes, seed=1)
    assert (again / "harness.jsonl").read_text() == (out / "harness.jsonl").read_text()  # seeded
    with pytest.raises(ValueError, match="too small to draw 8"):
        import_real(tmp_path / "small", corpus, {"test": test}, {"weight": 8, "harness": 2}, seed=1)
