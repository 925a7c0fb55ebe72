"""`whale eval` and `whale sql` through the real command line on the tiny model."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from whale.provenance import code_version
from whale.testing import ROOT, make_project


def whale(cwd, *args):
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return subprocess.run([sys.executable, "-m", "whale.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_eval_writes_rollouts_and_metrics_then_sql_reads_them(tmp_path, tiny_model_dir):
    make_project(tmp_path, tiny_model_dir, domains=("chess_puzzles", "math_reasoning"))
    harness = ROOT / "harnesses" / "examples" / "chess_choice.py"
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "--harness", str(harness), "--split", "test",
                "-k", "3", "--model", str(tiny_model_dir))
    assert out.returncode == 0, out.stderr[-2000:]
    metrics = json.loads(out.stdout[out.stdout.index("{"):])
    assert metrics["n"] == 2 * 3 and metrics["n_examples"] == 2 and metrics["stored"] == 6
    assert metrics["format_rate"] == 1.0  # a choice constraint always yields a legal move
    assert metrics["code"] == code_version()  # this checkout's commit (plus a diff hash while it is edited)
    lo, hi = metrics["mean_at_k_interval"]
    assert lo <= metrics["mean_at_k"] <= hi and f"[{lo:.3f}, {hi:.3f}]" in out.stderr
    saved = list((tmp_path / "runs" / "eval-chess_puzzles" / "metrics").glob("test-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["mean_at_k"] == metrics["mean_at_k"]

    out = whale(tmp_path, "sql",
                "SELECT run, split, count(*) AS n, sum(reward) AS solved FROM all_rollouts GROUP BY ALL")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "eval_chess_puzzles" in out.stdout and " 6 " in out.stdout
    out = whale(tmp_path, "sql", "SELECT start, code FROM eval_chess_puzzles.run_starts")
    assert out.returncode == 0 and metrics["code"][:12] in out.stdout, out.stdout + out.stderr[-2000:]

    # --set overrides params.yaml for this evaluation; the stored params say so
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "--harness", str(harness), "--split", "test",
                "-k", "1", "--model", str(tiny_model_dir), "--run", "eval-t05", "--set",
                '{"sampling": {"temperature": 0.5}}')
    assert out.returncode == 0, out.stderr[-2000:]
    out = whale(tmp_path, "sql", "SELECT params->'$.sampling.temperature' AS t FROM eval_t05.runs")
    assert out.returncode == 0 and "0.5" in out.stdout, out.stdout + out.stderr[-2000:]

    # bad input fails with a clear message, not a traceback
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "--harness", str(harness),
                "--set", '{"sampling": {"temperatur": 0.5}}')
    assert out.returncode == 2 and "temperatur" in out.stderr and "unknown key" in out.stderr
    # no --harness: the domain's h0 (harness_search.h0); the splits under --data-dir
    moved = tmp_path / "elsewhere"
    (tmp_path / "data").rename(moved)
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "--split", "test", "-k", "1",
                "--model", str(tiny_model_dir), "--run", "eval-h0", "--data-dir", str(moved),
                "--set", json.dumps({"harness_search": {"h0": str(harness)}}))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout[out.stdout.index("{"):])["harness"].endswith("chess_choice.py")
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "-k", "1", "--run", "eval-missing")
    assert out.returncode == 2 and "whale prepare" in out.stderr  # data/ is gone: said, not a traceback
    (moved).rename(tmp_path / "data")
    out = whale(tmp_path, "eval", "--domain", "go", "--harness", str(harness))
    assert out.returncode == 2 and "unknown domain 'go'" in out.stderr
    out = whale(tmp_path, "eval", "--domain", "chess_puzzles", "--harness", str(Path(tmp_path) / "missing.py"))
    assert out.returncode == 2 and "missing.py" in out.stderr


def test_sql_reads_a_running_job_through_its_snapshot(tmp_path):
    from whale.store import Store

    runs = tmp_path / "runs"
    with Store(runs / "done" / "rollouts.duckdb") as store:
        store.insert("runs", [{"run_id": "done", "domain": "d", "condition": "c", "params": "{}"}])
    writer = Store(runs / "busy" / "rollouts.duckdb", snapshot_every_s=3600)  # held open, as by a running flow

    def read():
        code = ("import sys; from whale.cli.sql import run_sql; "
                "print(run_sql('SELECT run_id FROM all_runs ORDER BY run_id', sys.argv[1]))")
        return subprocess.run([sys.executable, "-c", code, str(runs)], capture_output=True, text=True, timeout=120)
    try:
        out = read()  # opened, nothing written or published yet: the running job is skipped
        assert out.returncode == 0, out.stderr
        assert "done" in out.stdout and "busy" not in out.stdout and "skipped busy" in out.stderr
        # the first write publishes at once; the next, within the interval, waits for the next snapshot
        writer.insert("runs", [{"run_id": "busy", "domain": "d", "condition": "c", "params": "{}"}])
        writer.insert("runs", [{"run_id": "later", "domain": "d", "condition": "c", "params": "{}"}])
        out = read()  # the snapshot: everything committed when it was taken, nothing after
        assert out.returncode == 0, out.stderr
        assert "busy" in out.stdout and "later" not in out.stdout and "done" in out.stdout
        assert "busy is being written by a running job: read its snapshot of" in out.stderr
        code = ("import sys; from whale.report.data import load_runs; "
                "runs, warnings = load_runs(sys.argv[1]); print(sorted(r.run_id for r in runs), warnings)")
        out = subprocess.run([sys.executable, "-c", code, str(runs)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "['busy', 'done']" in out.stdout and "read its snapshot of" in out.stdout
        code = ("import sys; from pathlib import Path; from whale.cli.harness import _open; "
                "print(_open(Path(sys.argv[1])).query('SELECT run_id FROM runs'))")
        out = subprocess.run([sys.executable, "-c", code, str(runs / "busy")], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "[('busy',)]" in out.stdout and "read its snapshot of" in out.stderr
    finally:
        writer.close()
    assert sorted(p.name for p in (runs / "busy").iterdir()) == ["rollouts.duckdb"]
    out = read()
    assert "later" in out.stdout and "snapshot" not in out.stderr


def test_sql_names_a_single_runs_tables_bare_and_reports_bad_queries_without_a_traceback(tmp_path):
    import pytest

    from whale.cli.sql import run_sql
    from whale.store import Store

    runs = tmp_path / "runs"
    with Store(runs / "only" / "rollouts.duckdb") as store:
        store.insert("runs", [{"run_id": "only", "domain": "d", "condition": "c", "params": "{}"}])
    assert "only" in run_sql("SELECT run_id FROM runs", runs)
    assert "only" in run_sql("SELECT run FROM all_runs", runs)
    with pytest.raises(ValueError, match="query failed: Parser Error"):
        run_sql("SELEC 1", runs)
    with Store(runs / "other" / "rollouts.duckdb") as store:  # two runs: bare names are ambiguous
        store.insert("runs", [{"run_id": "other", "domain": "d", "condition": "c", "params": "{}"}])
    with pytest.raises(ValueError, match="query failed: Catalog Error") as refused:
        run_sql("SELECT run_id FROM runs", runs)
    assert "2 runs have a table 'runs'" in str(refused.value) and "only, other" in str(refused.value)
    assert "all_runs" in str(refused.value)
    assert run_sql('SELECT run_id FROM other.runs UNION ALL SELECT run_id FROM "only".runs', runs).split()[1:] == [
        "other", "only"]
    # a store from before run_starts: the view stacks the runs that have the table
    with Store(runs / "other" / "rollouts.duckdb") as store:
        store.record_start("other", "c1")
    with Store(runs / "only" / "rollouts.duckdb") as store:
        store.execute("DROP TABLE run_starts")
    assert run_sql("SELECT run, code FROM all_run_starts", runs).split() == ["run", "code", "other", "c1"]
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    out = whale(tmp_path, "sql", "SELEC 1")
    assert out.returncode == 2 and "whale: query failed" in out.stderr and "Traceback" not in out.stderr


def test_help_of_every_command_renders():
    from whale.cli import COMMANDS, parser

    p = parser()
    assert all(name in p.format_help() for name in COMMANDS)
    for name in COMMANDS:  # argparse %-formats help strings: a bare % breaks `whale --help`
        with pytest.raises(SystemExit) as stop:
            parser().parse_args([name, "--help"])
        assert stop.value.code == 0


def test_seeds_start_one_run_each_on_the_same_data():
    from whale.cli import parser
    from whale.cli.run import jobs

    args = parser().parse_args(["run", "--domain", "chess_puzzles", "--condition", "whale", "--seeds", "0,2",
                                "--set", '{"schedule": {"E": 0.25}}'])
    assert jobs(args) == [("whale", "chess_puzzles-whale-s0", {"schedule": {"E": 0.25}, "seed": 0}),
                          ("whale", "chess_puzzles-whale-s2", {"schedule": {"E": 0.25}, "seed": 2})]
    single = parser().parse_args(["run", "--domain", "chess_puzzles", "--condition", "whale"])
    assert jobs(single) == [("whale", None, None)]
    study = parser().parse_args(["run", "--domain", "chess_puzzles", "--condition", "weight_only,whale",
                                 "--seeds", "0,1"])
    assert [(c, r) for c, r, _ in jobs(study)] == [
        ("weight_only", "chess_puzzles-weight_only-s0"), ("weight_only", "chess_puzzles-weight_only-s1"),
        ("whale", "chess_puzzles-whale-s0"), ("whale", "chess_puzzles-whale-s1")]
    named = parser().parse_args(["run", "--condition", "weight_only,whale", "--run", "mine"])
    with pytest.raises(ValueError, match="give one --condition"):
        jobs(named)
    for bad in ("0,x", "1,1", "-1", ""):
        with pytest.raises(SystemExit):
            parser().parse_args(["run", "--seeds", bad])
    for bad in ("whale,whale", "wale", ""):
        with pytest.raises(SystemExit):
            parser().parse_args(["run", "--condition", bad])


def test_data_seed_alone_decides_the_generated_splits(tmp_path):
    from whale.cli import main

    for name, seeds in (("a", '{"data_seed": 3, "seed": 0}'), ("b", '{"data_seed": 3, "seed": 9}'),
                        ("c", '{"data_seed": 4, "seed": 0}')):
        assert main(["prepare", "--domain", "chess_puzzles", "--data-dir", str(tmp_path / name), "--set", seeds]) == 0
    test = {n: (tmp_path / n / "chess_puzzles" / "test.jsonl").read_text() for n in "abc"}
    assert test["a"] == test["b"] != test["c"]


def test_prepare_from_real_files_writes_disjoint_splits(tmp_path):
    from whale.cli import main

    rows = [{"problem": f"What is {i} + {i}?", "answer": 2 * i} for i in range(6)]
    weight, test = tmp_path / "weight.jsonl", tmp_path / "test.jsonl"
    weight.write_text("".join(json.dumps(r) + "\n" for r in rows))
    test.write_text("".join(json.dumps({"prompt": r["problem"], "answer": r["answer"]}) + "\n" for r in rows[:2]))
    data = tmp_path / "data"
    assert main(["prepare", "--domain", "math_reasoning", "--data-dir", str(data),
                 "--from", f"weight={weight}", "--from", f"test={test}"]) == 0
    lines = {s: (data / "math_reasoning" / f"{s}.jsonl").read_text().splitlines() for s in ("weight", "test")}
    assert len(lines["test"]) == 2 and len(lines["weight"]) == 4  # the two test problems left the weight split
    assert main(["prepare", "--domain", "math_reasoning", "--from", "dev=x.jsonl"]) == 2
    assert main(["prepare", "--domain", "all", "--from", f"test={test}"]) == 2


def test_params_sources_name_real_files_and_the_other_splits_are_generated(tmp_path, capsys):
    from whale.cli import main

    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps({"question": f"What is {i} times 7?", "answer": 7 * i}) + "\n"
                            for i in range(3)))
    data = tmp_path / "data"
    sources = json.dumps({"sources": {"math_reasoning": {"test": str(test)}},
                          "data": {"math_reasoning": {"weight": 5, "harness": 2, "test": 4}}})
    assert main(["prepare", "--domain", "math_reasoning", "--data-dir", str(data), "--set", sources]) == 0
    splits = ("weight", "harness", "test")
    lines = {s: (data / "math_reasoning" / f"{s}.jsonl").read_text().splitlines() for s in splits}
    assert [len(lines[s]) for s in splits] == [5, 2, 3]
    assert "What is 2 times 7?" in lines["test"][2]
    assert f"test 3 from {test}" in capsys.readouterr().out
    missing = json.dumps({"sources": {"math_reasoning": {"test": str(tmp_path / "nope.jsonl")}}})
    assert main(["prepare", "--domain", "math_reasoning", "--data-dir", str(data), "--set", missing]) == 2
    partial = json.dumps({"sources": {"search_qa": {"test": str(test)}}})
    assert main(["prepare", "--domain", "search_qa", "--data-dir", str(data), "--set", partial]) == 2
    assert "needs a corpus" in capsys.readouterr().err
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text(json.dumps({"id": "0", "contents": '"Tavia"\nTavia Tavia is a city.'}) + "\n")
    questions = tmp_path / "nq_test.jsonl"
    questions.write_text("".join(json.dumps({"question": f"q{i}?", "golden_answers": ["Tavia"]}) + "\n"
                                 for i in range(12)))
    sizes = json.dumps({"data": {"search_qa": {"weight": 4, "harness": 2, "test": 64}}})
    assert main(["prepare", "--domain", "search_qa", "--data-dir", str(data), "--from", f"test={questions}",
                 "--corpus", str(corpus), "--set", sizes]) == 0
    assert "test 6, harness 2 (drawn), weight 4 (drawn)" in capsys.readouterr().out
    assert "Tavia\\nTavia is a city." in (data / "search_qa" / "corpus.jsonl").read_text()


def test_dry_run_prints_the_plan_and_refuses_what_cannot_run(tmp_path, tiny_model_dir, capsys, monkeypatch):
    from whale.cli import main

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--domain", "chess_puzzles", "--condition", "whale,harness_only", "--dry-run",
                 "--set", json.dumps(overrides)]) == 0
    out = capsys.readouterr().out
    assert out.count("0 problem(s): ready to run") == 2 and "a fixed whale cycle" in out
    two = {**overrides, "rsft": {**overrides["rsft"], "processes": 2}, "parallel": {"engine": "ray", "workers": 3}}
    assert main(["run", "--domain", "chess_puzzles", "--condition", "whale", "--dry-run",
                 "--set", json.dumps(two)]) == 0
    out = capsys.readouterr().out
    assert "GiB on each of 2 data-parallel ranks" in out and "a local Ray the run starts (3 workers)" in out
    assert not (tmp_path / "runs").exists()  # nothing ran
    bad = {**overrides, "rsft": {**overrides["rsft"], "prompt_batch": 64, "max_seq_len": 8},
           "data": {"chess_puzzles": {"weight": 9, "harness": 2, "test": 2}}}
    assert main(["run", "--domain", "chess_puzzles", "--condition", "whale", "--dry-run",
                 "--set", json.dumps(bad)]) == 2
    captured = capsys.readouterr()
    assert "below h0's token budget" in captured.out and "smaller than one prompt batch" in captured.out
    assert "holds weight 4 (params: 9)" in captured.out and "dry run: 3 problem(s)" in captured.err


def test_dry_run_says_when_the_checkpoints_may_not_fit(tmp_path, tiny_model_dir, capsys, monkeypatch):
    import shutil

    import whale.run.disk
    from whale.cli import main

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    args = ["run", "--domain", "chess_puzzles", "--condition", "whale", "--dry-run", "--set"]
    assert main([*args, json.dumps(overrides)]) == 0
    assert "disk under runs: a checkpoint about" in capsys.readouterr().out
    full = shutil.disk_usage(tmp_path)._replace(free=1)  # a disk with no room left
    monkeypatch.setattr(whale.run.disk.shutil, "disk_usage", lambda path: full)
    assert main([*args, json.dumps(overrides)]) == 2
    assert "set storage.keep_checkpoints" in capsys.readouterr().out


def test_dry_run_measures_h0_under_the_null_policy(tmp_path, tiny_model_dir, capsys, monkeypatch):
    """The run would stop at start on an h0 that plays the task itself: the dry run says so first."""
    from tests.support.chess import plays_itself
    from whale.cli import main

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--domain", "chess_puzzles", "--condition", "whale", "--dry-run",
                 "--set", json.dumps(overrides)]) == 0
    assert "h0 null policy: 0." in capsys.readouterr().out
    h0 = tmp_path / "h0.py"
    h0.write_text(plays_itself(Path(overrides["harness_search"]["h0"]).read_text()))
    overrides["harness_search"]["h0"] = str(h0)
    assert main(["run", "--domain", "chess_puzzles", "--condition", "whale", "--dry-run",
                 "--set", json.dumps(overrides)]) == 2
    captured = capsys.readouterr()
    assert f"h0 {h0}: scores 1.000 on the harness split under the null policy" in captured.out
    assert "dry run: 1 problem(s)" in captured.err and not (tmp_path / "runs").exists()
