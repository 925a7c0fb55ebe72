"""`whale harness show|diff|lineage` on a synthetic archive built with the real Archive and Store."""
from __future__ import annotations

import hashlib

import pytest

from harnesses.archive import Archive
from whale.cli.harness import diff, lineage, run_command, run_dir_for, show
from whale.store import Store

SEED = '''from harnesses.contract import BaseHarness, Prompt, Finish


class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": observation["question"]}], max_new_tokens=256)
'''
CHILD = SEED.replace("max_turns = 2", "max_turns = 3")
GRANDCHILD = CHILD.replace("max_new_tokens=256", "max_new_tokens=128")
BROKEN = SEED.replace("max_turns = 2", "max_turns = oops")
W0, W1 = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


def _score(hid, wid, cycle, iteration, mean):
    return {"run_id": "r", "harness_id": hid, "weights_id": wid, "split": "harness", "cycle": cycle,
            "iteration": iteration, "n": 16, "mean_reward": mean, "format_rate": 1.0, "truncation_rate": 0.0,
            "error_rate": 0.0, "mean_turns": 1.5}


def _phase(cycle, phase, hid, wid):
    return {"run_id": "r", "cycle": cycle, "phase": phase, "first_step": 0, "last_step": 1, "harness_id": hid,
            "weights_id": wid, "decision": "end", "reason": "fixed length"}


@pytest.fixture()
def run_dir(tmp_path):
    """Seed -> child (accepted in cycle 1) -> grandchild; seed -> broken candidate (error)."""
    d = tmp_path / "runs" / "r"
    store = Store(d / "rollouts.duckdb")
    archive = Archive(d, store, "math_reasoning")
    seed = archive.add(SEED, origin="seed")
    archive.set_status(seed, "ok")
    child = archive.add(CHILD, origin="offline", parents=[seed], hypothesis="one more turn lets the model retry",
                        axis="budget", components=["turns"], cycle=1, iteration=2)
    archive.set_status(child, "ok")
    archive.set_null_reward(child, 0.0625)
    grand = archive.add(GRANDCHILD, origin="claude", parents=[child, seed], hypothesis="shorter turns truncate less",
                        cycle=2, iteration=2)
    archive.set_status(grand, "ok")
    broken = archive.add(BROKEN, origin="offline", parents=[seed], hypothesis="typo", cycle=1, iteration=2)
    archive.set_status(broken, "error", "Traceback (most recent call last):\nNameError: name 'oops' is not defined")
    store.insert("scores", [_score(seed, W0, 1, 1, 0.25), _score(child, W0, 1, 2, 0.5), _score(child, W0, 1, 3, 0.375),
                            _score(child, W1, 2, 1, 0.625), _score(grand, W1, 2, 2, 0.5),
                            _score(child, W1, 2, 0, 0.5625)])
    store.insert("phases", [_phase(1, "weight", seed, W0), _phase(1, "harness", child, W0),
                            _phase(2, "weight", child, W1), _phase(2, "harness", child, W1)])
    store.close()
    return d, {"seed": seed, "child": child, "grand": grand, "broken": broken}


def test_show_lists_metadata_scores_roles_and_source(run_dir):
    d, ids = run_dir
    out = show(d, ids["child"][:6])  # a unique prefix is enough
    assert out.startswith(f"harness {ids['child']}  (math_reasoning, origin offline, status ok)")
    assert f"parents:    {ids['seed']}" in out
    assert "hypothesis: one more turn lets the model retry" in out
    assert "null reward: 0.062" in out and "null reward: -" in show(d, ids["seed"])
    assert "phases:     accepted c1, weights c2, accepted c2" in out
    assert f"weights {W0}  harness c1 i2  mean 0.500 over 16" in out
    assert f"weights {W1}  harness c2 i1  mean 0.625 over 16" in out
    assert f"weights {W1}  harness c2 re-check  mean 0.562 over 16" in out  # the acceptance re-check
    assert out.rstrip().endswith(CHILD.rstrip())


def test_show_reports_the_error_of_a_broken_candidate(run_dir):
    d, ids = run_dir
    out = show(d, ids["broken"])
    assert "status error" in out and "NameError: name 'oops' is not defined" in out
    assert "scores: none" in out


def test_diff_is_a_unified_diff_of_the_sources(run_dir):
    d, ids = run_dir
    out = diff(d, ids["seed"], ids["child"])
    assert out.startswith(f"--- {ids['seed']}.py\n+++ {ids['child']}.py\n")
    assert "-    max_turns = 2\n+    max_turns = 3\n" in out
    assert diff(d, ids["child"], ids["child"]) == ""


def test_lineage_draws_the_tree_from_the_seeds(run_dir):
    d, ids = run_dir
    lines = lineage(d).splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(f"{ids['seed']} [seed, ok] {W0}=0.250  <- weights c1")
    # children in (cycle, iteration, creation) order: the child first, then the broken candidate
    child_line = next(line for line in lines if ids["child"] in line.split()[1])
    assert child_line.startswith(f"├── {ids['child']} [offline, ok] {W0}=0.500  {W1}=0.625  <- accepted c1")
    assert lines[2].startswith(f"│   └── {ids['grand']} [claude, ok] {W1}=0.500")
    assert f"(also from {ids['seed']})" in lines[2] and '"shorter turns truncate less"' in lines[2]
    assert lines[3].startswith(f"└── {ids['broken']} [offline, error] unscored")
    # a failed candidate shows the exception line of its error, not its hypothesis
    assert lines[3].endswith('"NameError: name \'oops\' is not defined"') and "typo" not in lines[3]


def test_lineage_from_one_harness_shows_its_ancestors_and_subtree(run_dir):
    d, ids = run_dir
    lines = lineage(d, ids["grand"]).splitlines()
    assert lines[0] == f"ancestors: {ids['child']} <- {ids['seed']}"
    assert lines[1].startswith(f"{ids['grand']} [claude, ok]") and len(lines) == 2


def test_reading_does_not_modify_the_run(run_dir):
    d, ids = run_dir
    db = d / "rollouts.duckdb"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    show(d, ids["seed"]), diff(d, ids["seed"], ids["grand"]), lineage(d)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_bad_references_fail_clearly(run_dir, tmp_path):
    d, ids = run_dir
    with pytest.raises(ValueError, match="no harness id starts with 'ffff'"):
        show(d, "ffff")
    with pytest.raises(ValueError, match="ambiguous"):
        show(d, "")  # the empty prefix matches every harness
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        lineage(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="takes 2 harness id"):
        run_command("diff", d, [ids["seed"]])
    (d / "harnesses" / f"{ids['grand']}.py").unlink()
    with pytest.raises(FileNotFoundError, match="source is gone"):
        show(d, ids["grand"])


def test_run_command_and_run_dir_resolution(run_dir, tmp_path):
    d, ids = run_dir
    assert run_dir_for(tmp_path / "runs") == d  # the only run needs no --run
    assert run_command("lineage", d, []) == lineage(d)
    assert run_command("show", d, [ids["seed"]]) == show(d, ids["seed"])
    Store(tmp_path / "runs" / "other" / "rollouts.duckdb").close()
    with pytest.raises(ValueError, match="runs found: other, r"):
        run_dir_for(tmp_path / "runs")
    assert run_dir_for(tmp_path / "runs", "other") == tmp_path / "runs" / "other"
