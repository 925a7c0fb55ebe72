"""The `whale` flow end to end on the tiny model: phases, decisions, ledger, resume."""
import logging
import shutil
from unittest.mock import patch

import duckdb
import pytest

from whale.run.conditions import get_condition
from whale.run.context import domain_for
from whale.run.disk import checkpoints_written
from whale.run.settings import load_settings
from whale.testing import make_project


@pytest.fixture()
def project(tmp_path, tiny_model_dir, monkeypatch):
    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    return tmp_path, overrides


def table(db, sql):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


class RunLog(logging.Handler):
    """Every message logged to a flow or task run (what the Prefect UI shows)."""

    NAMES = ("prefect.flow_runs", "prefect.task_runs")

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        for name in self.NAMES:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc):
        for name in self.NAMES:
            logging.getLogger(name).removeHandler(self)


def test_fixed_whale_alternates_weight_first(project):
    from flows.whale import whale

    tmp, overrides = project
    with RunLog() as log:
        result = whale(domain="chess_puzzles", condition="whale", overrides=overrides)
    text = "\n".join(log.messages)
    assert "RSFT step 1: train reward" in text and "cycle 1 weight phase ended" in text
    # dill (datasets' fingerprint of TRL's map functions) reads a disassembly from sys.stdout; a
    # patched print (log_prints) would send it to the run log instead and leave dill blind to globals
    assert "LOAD_GLOBAL" not in text
    db = tmp / "runs" / "chess_puzzles-whale" / "rollouts.duckdb"
    phases = table(db, "SELECT cycle, phase, first_step, last_step, reason, rollouts FROM phases "
                       "ORDER BY cycle, phase DESC")
    # weight phase first, then alternating; E = 0.5 epoch of 4 examples at batch 2 = 1 step per weight phase
    assert [p for _, p, *_ in phases] == ["weight", "harness"] * (len(phases) // 2) + ["weight"] * (len(phases) % 2)
    weights = [p for p in phases if p[1] == "weight"]
    assert [(first, last) for _, _, first, last, *_ in weights] == [(i, i) for i in range(len(weights))]
    ledger = dict(table(db, "SELECT phase, sum(rollouts) FROM ledger GROUP BY phase"))
    assert ledger["weight"] == len(weights) * 2 * 2  # steps x prompts x k
    # the budget binds: every phase's recorded spend adds up to the ledger, which reaches the budget
    # and passes it by less than one unit (the largest here: an RSFT step or a re-check, 4 rollouts)
    spent = ledger["weight"] + ledger["harness"]
    assert sum(p[5] for p in phases) == spent == result["rollouts"] and 16 <= spent < 16 + 4
    # each harness phase: iteration 1 re-evaluates the incoming harness on the 2 harness examples,
    # iteration 2 scores M=1 candidate, and, when it ran, the two are re-checked (iteration 0)
    harness = [p for p in phases if p[1] == "harness"]
    assert harness and all(p[4].startswith(("fixed length: 2 iterations", "budget")) for p in harness)
    scores = table(db, "SELECT cycle, iteration, count(*) FROM scores GROUP BY ALL ORDER BY ALL")
    assert all((c, 1, 1) in scores for c, *_ in harness)
    steps = table(db, "SELECT step, accepted, skipped, weights_before <> weights_after FROM train_steps ORDER BY step")
    assert [s[0] for s in steps] == list(range(len(weights)))
    for _, accepted, skipped, changed in steps:
        assert skipped == (accepted == 0) and changed == (accepted > 0)
    # the grid (eval.every = 8): one test evaluation per crossed multiple of 8, within a unit of it
    evals = table(db, "SELECT phase, cumulative_rollouts FROM evals ORDER BY cumulative_rollouts, cycle")
    grid = [(p, c) for p, c in evals if p.startswith("grid-")]
    assert [p for p, _ in grid] == ["grid-1", "grid-2"] and all(8 * i <= c < 8 * i + 4 for i, (_, c) in
                                                                  enumerate(grid, 1))
    assert evals[0] == ("start", 0) and evals[-1][1] == spent



def test_rerun_of_a_finished_run_adds_nothing(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["schedule"]["budget"] = 2  # harness_only: the re-evaluation of h0 spends it all
    first = whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"
    before = table(db, "SELECT count(*) FROM rollouts")[0][0]
    second = whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
    assert table(db, "SELECT count(*) FROM rollouts")[0][0] == before
    assert first == second
    assert table(db, "SELECT phase, reason FROM phases") == [("harness", "budget: 2 of 2 rollouts spent")]


def test_a_run_id_refuses_other_params(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["schedule"]["budget"] = 2
    whale(domain="chess_puzzles", condition="harness_only", run_id="r", overrides=overrides)
    overrides["schedule"]["budget"] = 4
    with pytest.raises(ValueError, match="another domain/condition/params"):
        whale(domain="chess_puzzles", condition="harness_only", run_id="r", overrides=overrides)


def test_stagewise_splits_the_budget_and_picks_its_weight_point_on_the_harness_split(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["schedule"].update(budget=16, stagewise_weight_share=0.5)
    whale(domain="chess_puzzles", condition="stagewise", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-stagewise" / "rollouts.duckdb"
    phases = table(db, "SELECT cycle, phase, last_step, rollouts FROM phases ORDER BY cycle")
    # the weight stage spends half the budget: 2 RSFT steps of 2 prompts x 2 samples
    assert phases[0] == (1, "weight", 1, 8) and phases[1][1] == "harness"
    # each checkpoint (E = 1 step apart) is scored with h0 on the harness split, never on test
    picks = table(db, "SELECT iteration, n FROM scores WHERE cycle = 1 AND split = 'harness' ORDER BY iteration")
    assert picks == [(1, 2), (2, 2)]
    spent = table(db, "SELECT sum(rollouts) FROM ledger WHERE phase <> 'eval'")[0][0]
    assert spent == 8 + 4 + phases[1][3] and 16 <= spent < 16 + 4
    assert table(db, "SELECT count(*) FROM rollouts WHERE split = 'test' AND phase <> 'eval'")[0][0] == 0


def test_harness_search_keeps_budget_for_its_recheck_and_leaves_no_candidate_pending(project):
    from flows.whale import whale

    tmp, overrides = project
    # re-evaluation 2 + candidates of 2 rollouts while 4 stay for the re-check (incoming + top 1,
    # 1 sample x 2 examples): the proposer stops at 8 spent, the re-check takes it to 12
    overrides["schedule"]["budget"] = 12
    overrides["harness_search"]["M"] = 2
    whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"
    statuses = dict(table(db, "SELECT status, count(*) FROM harnesses GROUP BY ALL"))
    assert "pending" not in statuses
    spent = table(db, "SELECT sum(rollouts) FROM ledger WHERE phase <> 'eval'")[0][0]
    assert 12 <= spent < 12 + 4
    challengers = table(db, "SELECT count(*) FROM scores WHERE cycle = 1 AND iteration >= 2")[0][0]
    rechecked = table(db, "SELECT count(*) FROM scores WHERE cycle = 1 AND iteration = 0")[0][0]
    assert rechecked == (2 if challengers else 0)
    assert table(db, "SELECT phase FROM evals ORDER BY rowid DESC LIMIT 1")[0][0] == "harness"


def test_acceptance_on_the_recheck_reads_only_the_samples_drawn_after_the_choice(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["schedule"]["budget"] = 12  # as above: room for one re-check
    overrides["harness_search"]["accept"] = {"rule": "margin", "level": 0.9, "margin": 0.0, "samples": "recheck"}
    whale(domain="chess_puzzles", condition="harness_only", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"
    [(reason,)] = table(db, "SELECT reason FROM phases WHERE cycle = 1 AND phase = 'harness'")
    rechecked = table(db, "SELECT count(*) FROM scores WHERE cycle = 1 AND iteration = 0")[0][0]
    assert rechecked == 2 and "mean paired advantage > 0 on the re-check's samples" in reason


def test_without_phase_evaluations_only_the_start_the_grid_and_the_end_are_evaluated(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["eval"]["phases"] = False
    result = whale(domain="chess_puzzles", condition="whale", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-whale" / "rollouts.duckdb"
    phases = [p for (p,) in table(db, "SELECT phase FROM evals ORDER BY rowid")]
    assert phases == ["start", "grid-1", "grid-2", "final"]
    final = table(db, "SELECT mean_at_k, cumulative_rollouts FROM evals WHERE phase = 'final'")[0]
    assert (result["test_mean_at_k"], result["rollouts"]) == final


def test_weight_only_trains_data_parallel_over_two_processes(project):
    """rsft.processes 2: the run's trainer is rank 0 of a gloo group; its steps train and the run ends
    with the worker stopped."""
    import multiprocessing

    from flows.whale import whale

    tmp, overrides = project
    overrides["rsft"]["processes"] = 2
    result = whale(domain="chess_puzzles", condition="weight_only", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-weight_only" / "rollouts.duckdb"
    trained = table(db, "SELECT count(*) FROM train_steps WHERE NOT skipped")[0][0]
    assert trained >= 1 and result["weights_id"] != table(db, "SELECT weights_id FROM evals ORDER BY rowid")[0][0]
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("rsft-rank")]


def test_the_offline_proposer_spends_no_slot_on_a_candidate_that_replays_its_parent(project, tiny_model_dir):
    """Search QA's seed under random weights never searches, so edits that act on retrieved
    passages change no episode; the proposer asks the run's replay check and offers others."""
    from flows.whale import whale
    from whale.testing import ROOT, make_project

    tmp, _ = project
    overrides = make_project(tmp, tiny_model_dir, domains=("search_qa",))
    overrides["harness_search"].update({"M": 2, "h0": str(ROOT / "harnesses" / "seeds" / "search_qa.py")})
    # the incumbent's re-evaluation (2 rollouts), one iteration of two candidates (4) and the re-check (4)
    overrides["schedule"]["budget"] = 10
    overrides["eval"].update({"every": 0, "phases": False})
    whale(domain="search_qa", condition="harness_only", overrides=overrides)
    db = tmp / "runs" / "search_qa-harness_only" / "rollouts.duckdb"
    statuses = table(db, "SELECT status, count(*) FROM harnesses WHERE origin = 'offline' GROUP BY ALL")
    assert statuses == [("ok", 2)]


def test_a_stop_asked_for_before_a_phase_ends_the_run_before_its_first_step(project):
    """What the phases do when a signal's exit was swallowed: raise it again at the next step."""
    import signal

    from flows.whale import whale
    from whale.run import stop

    tmp, overrides = project
    stop.clear()
    stop.request_stop(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as e:
            whale(domain="chess_puzzles", condition="whale", overrides=overrides)
    finally:
        stop.clear()
    assert e.value.code == 128 + signal.SIGTERM
    db = tmp / "runs" / "chess_puzzles-whale" / "rollouts.duckdb"
    assert table(db, "SELECT DISTINCT phase FROM rollouts") == [("eval",)]  # the start's evaluation only
    assert table(db, "SELECT count(*) FROM phases")[0][0] == 0


def test_keep_checkpoints_leaves_the_newest_and_the_run_resumes_under_another_value(project):
    from flows.whale import whale

    tmp, overrides = project
    overrides["storage"] = {"keep_checkpoints": 1}
    with RunLog() as log:
        first = whale(domain="chess_puzzles", condition="weight_only", overrides=overrides)
    db = tmp / "runs" / "chess_puzzles-weight_only" / "rollouts.duckdb"
    ends = table(db, "SELECT last_step + 1 FROM phases WHERE phase = 'weight' ORDER BY cycle")
    assert len(ends) >= 2  # a checkpoint at the end of each weight phase, all but the last removed
    ckpts = tmp / "runs" / "chess_puzzles-weight_only" / "checkpoints"
    assert [p.name for p in ckpts.iterdir()] == [f"step-{ends[-1][0]:06d}"]
    assert f"removed checkpoint step-{ends[0][0]:06d} (storage.keep_checkpoints: 1)" in log.messages
    settings = load_settings(overrides=overrides, domain="chess_puzzles")
    sizes = [len(domain_for(settings, "chess_puzzles").examples(split)) for split in ("weight", "harness")]
    assert len(ends) <= checkpoints_written(settings, get_condition("weight_only"), *sizes)  # the estimate bounds it
    overrides["storage"] = {"keep_checkpoints": 0}  # what a run keeps on disk is not what it is
    full = shutil.disk_usage(tmp)._replace(free=1)  # a disk with no room left: said at the start, no stop
    with RunLog() as log, patch.object(shutil, "disk_usage", lambda path: full):
        assert whale(domain="chess_puzzles", condition="weight_only", overrides=overrides) == first
    assert any(m.startswith("warning: the run's checkpoints may need") for m in log.messages)
