"""kill -9 a running `whale run` at several points, rerun it, and compare with an uninterrupted run:
the same rollouts, phases (with the rollouts each spent under the budget), steps, grid evaluations."""
import json
import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from whale.testing import make_project

ARGS = ["--domain", "chess_puzzles", "--condition", "whale", "--run", "r"]
# Kill points: mid weight phase, right after a phase is recorded, inside the harness phase, mid second weight phase.
KILL_AT = ["RSFT step 0:", "cycle 1 weight phase ended", "propose_harnesses-c1-i2", "RSFT step 1:"]


def whale_cmd(overrides):
    return [sys.executable, "-m", "whale.cli", "run", *ARGS, "--set", json.dumps(overrides)]


def env_for(tmp):
    # The user's Prefect home (its database already migrated by earlier flows): a fresh one per
    # process makes every temporary server migrate from scratch, which a loaded machine may not
    # finish within the start-up wait.
    return {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}


def run_to_end(cwd, overrides):
    out = subprocess.run(whale_cmd(overrides), cwd=cwd, env=env_for(cwd), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def run_and_kill(cwd, overrides, marker) -> bool:
    """Start the run, SIGKILL its whole process group when ``marker`` appears; False if it never did."""
    proc = subprocess.Popen(whale_cmd(overrides), cwd=cwd, env=env_for(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 600
    try:
        for line in proc.stdout:
            if marker in line:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            if time.time() > deadline:
                break
        return False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def snapshot(cwd):
    con = duckdb.connect(str(cwd / "runs" / "r" / "rollouts.duckdb"), read_only=True)
    try:
        q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        return {
            "rollouts": q("SELECT phase, cycle, step, harness_id, weights_id, count(*), sum(reward) FROM rollouts "
                          "GROUP BY ALL ORDER BY ALL"),
            "duplicates": q("SELECT count(*) - count(DISTINCT (phase, cycle, step, split, example_id, sample_idx, "
                            "harness_id, weights_id)) FROM rollouts"),
            "phases": q("SELECT cycle, phase, first_step, last_step, harness_id, weights_id, reason, rollouts "
                        "FROM phases ORDER BY ALL"),
            "train_steps": q("SELECT step, weights_before, weights_after, accepted FROM train_steps ORDER BY step"),
            "evals": q("SELECT cycle, phase, harness_id, weights_id, mean_at_k, cumulative_rollouts FROM evals "
                       "ORDER BY ALL"),
            "harnesses": q("SELECT harness_id, status FROM harnesses ORDER BY ALL"),
        }
    finally:
        con.close()


def run_starts(cwd):
    con = duckdb.connect(str(cwd / "runs" / "r" / "rollouts.duckdb"), read_only=True)
    try:
        return con.execute("SELECT start, code FROM run_starts ORDER BY start").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_kill_9_at_any_point_then_resume_matches_an_uninterrupted_run(tmp_path, tiny_model_dir):
    ref, crashed = tmp_path / "ref", tmp_path / "crashed"
    ref.mkdir(), crashed.mkdir()
    overrides = make_project(ref, tiny_model_dir)
    make_project(crashed, tiny_model_dir)
    run_to_end(ref, overrides)
    killed = [m for m in KILL_AT if run_and_kill(crashed, overrides, m)]
    assert len(killed) >= 3, f"only reached {killed}"
    run_to_end(crashed, overrides)
    expected, got = snapshot(ref), snapshot(crashed)
    assert got["duplicates"] == [(0,)]
    for key in expected:
        assert got[key] == expected[key], key
    # every process start is stored with its code: one for the uninterrupted run, one per process started here
    ref_starts, crashed_starts = run_starts(ref), run_starts(crashed)
    assert [s for s, _ in crashed_starts] == list(range(1, len(KILL_AT) + 2)) and len(ref_starts) == 1
    assert {c for _, c in crashed_starts} == {ref_starts[0][1]}
