"""Loading real math rows: DAPO-Math-17k and AIME layouts, Parquet and JSONL, clear errors."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from domains.math_reasoning import make_domain
from domains.math_reasoning.load import load_rows

DAPO_HEAD = ("Solve the following math problem step by step. The last line of your response should be "
             "of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_TAIL = '\n\nRemember to put your answer on its own line after "Answer:".'


def dapo_row(problem, answer, index):
    return {"data_source": "math_dapo",
            "prompt": [{"role": "user", "content": DAPO_HEAD + problem + DAPO_TAIL}],
            "ability": "MATH", "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": index}}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_dapo_parquet_strips_answer_instructions_and_dedupes(tmp_path):
    rows = [dapo_row("Find $x$ if $x+1=35$.", "34", "a1"), dapo_row("Find $x$ if $x+1=35$.", "34", "a2"),
            dapo_row("How many primes are below 10?", "4", "b")]
    examples = load_rows(write_parquet(tmp_path / "dapo.parquet", rows), "weight")
    assert [e.public["question"] for e in examples] == ["Find $x$ if $x+1=35$.", "How many primes are below 10?"]
    assert [e.gold["answer"] for e in examples] == [34, 4]
    assert [e.id for e in examples] == ["math-weight-dapo-a1", "math-weight-dapo-b"]
    assert all(e.split == "weight" for e in examples)


def test_aime_layouts_jsonl_and_parquet(tmp_path):
    aime24 = [{"ID": "2024-I-1", "Problem": "Every morning Aya walks...", "Solution": "...", "Answer": 204}]
    aime25 = [{"id": 0, "problem": "Find the sum of all integer bases...", "answer": "70", "year": 2025}]
    a = load_rows(write_parquet(tmp_path / "aime24.parquet", aime24), "test")
    b = load_rows(write_jsonl(tmp_path / "aime25.jsonl", aime25), "test")
    assert (a[0].public, a[0].gold, a[0].id) == ({"question": "Every morning Aya walks..."}, {"answer": 204},
                                                 "math-test-aime24-2024-I-1")
    assert (b[0].gold, b[0].id) == ({"answer": 70}, "math-test-aime25-0")


def test_flat_prompt_answer_layout_and_errors_that_list_the_accepted_columns(tmp_path):
    rows = [{"prompt": "What is 6 times 7?", "answer": 42}, {"prompt": "And 2 + 2?", "answer": "4"}]
    got = load_rows(write_jsonl(tmp_path / "flat.jsonl", rows), "test")
    assert [(e.public["question"], e.gold["answer"]) for e in got] == [("What is 6 times 7?", 42), ("And 2 + 2?", 4)]
    with pytest.raises(ValueError, match=r"line 1: missing problem text; accepted: .*'question', 'prompt'.*"
                                         r"this row has 'text', 'answer'"):
        load_rows(write_jsonl(tmp_path / "cols.jsonl", [{"text": "p", "answer": 1}]), "test")
    with pytest.raises(ValueError, match=r"line 1: missing answer; accepted: 'answer', 'Answer'"):
        load_rows(write_jsonl(tmp_path / "noanswer.jsonl", [{"problem": "p", "solution": "1"}]), "test")


def test_non_integer_answer_names_the_line(tmp_path):
    rows = [{"problem": "p1", "answer": "3"}, {"problem": "p2", "answer": "7"},
            {"problem": "p3", "answer": "\\frac{1}{2}"}]
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 3: answer .* is not an integer"):
        load_rows(write_jsonl(tmp_path / "bad.jsonl", rows), "test")


def test_missing_problem_names_the_row(tmp_path):
    rows = [dapo_row("ok", "1", 0), {**dapo_row("x", "2", 1), "prompt": [{"role": "system", "content": "hi"}]}]
    with pytest.raises(ValueError, match=r"bad\.parquet: row 1: missing problem"):
        load_rows(write_parquet(tmp_path / "bad.parquet", rows), "weight")


def test_malformed_json_and_unknown_format(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"problem": "p", "answer": 1}\n{not json\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: not JSON"):
        load_rows(path, "test")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_rows(tmp_path / "rows.csv", "test")
    with pytest.raises(ValueError, match=r"line 1: answer True"):
        load_rows(write_jsonl(tmp_path / "b.jsonl", [{"problem": "p", "answer": True}]), "test")


def test_import_files_keeps_splits_disjoint(tmp_path):
    weight = write_parquet(tmp_path / "w.parquet", [dapo_row("shared", "1", 0), dapo_row("only weight", "2", 1)])
    test = write_jsonl(tmp_path / "t.jsonl", [{"problem": "Shared", "answer": 1}])
    domain = make_domain(tmp_path / "data")
    assert domain.import_files({"weight": weight, "test": test}) == {"test": 1, "weight": 1}
    assert [e.public["question"] for e in domain.examples("weight")] == ["only weight"]


def test_a_parquet_file_and_its_jsonl_copy_give_the_same_ids(tmp_path):
    rows = [{"problem": f"What is {i} + 1?", "answer": i + 1} for i in range(3)]
    parquet = load_rows(write_parquet(tmp_path / "m.parquet", rows), "test")
    path = tmp_path / "m.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n" for r in rows))  # a blank line is not a row
    jsonl = load_rows(path, "test")
    assert [e.id for e in jsonl] == [e.id for e in parquet] == [f"math-test-m-{i}" for i in range(3)]


def test_a_real_test_set_alone_keeps_generated_splits_disjoint_from_it(tmp_path):
    domain = make_domain(tmp_path / "data")
    domain.prepare({"weight": 6, "harness": 3, "test": 4}, seed=0)
    taken = domain.examples("weight")[0]
    test = write_jsonl(tmp_path / "t.jsonl", [{"problem": taken.public["question"], "answer": taken.gold["answer"]},
                                              {"problem": "A new problem?", "answer": 5}])
    assert domain.import_files({"test": test}) == {"test": 2}
    assert [len(domain.examples(s)) for s in ("weight", "harness", "test")] == [5, 3, 2]
    assert taken.public["question"] not in [e.public["question"] for e in domain.examples("weight")]
