"""parallel.engine: ray — rollout jobs as Prefect tasks on a local Ray (prefect-ray), two workers."""
import duckdb
import pytest

from whale.testing import make_project

pytestmark = pytest.mark.slow  # starts a Ray cluster (about 10 s) and worker processes


@pytest.fixture()
def project(tmp_path, tiny_model_dir, monkeypatch):
    overrides = make_project(tmp_path, tiny_model_dir)
    overrides["harness_search"]["M"] = 2  # two candidates per iteration: two jobs at once
    monkeypatch.chdir(tmp_path)
    return tmp_path, overrides


def rollouts(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT cycle, phase, step, harness_id, weights_id, example_id, sample_idx, reward, "
                           "stop_reason, token_ids FROM rollouts ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_a_run_on_ray_draws_the_rollouts_a_local_run_draws(project):
    """Candidates, re-checks and test evaluations go to Ray workers (test evaluations split over
    two); the store ends up with the same rollouts, token for token, as the same run done locally."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.whale import whale

    tmp, overrides = project
    local = whale(domain="chess_puzzles", condition="whale", run_id="local", overrides=overrides)
    overrides["parallel"] = {"engine": "ray", "workers": 2}
    on_ray = whale(domain="chess_puzzles", condition="whale", run_id="ray", overrides=overrides,
                   return_state=True)
    result = on_ray.result()
    expected = rollouts(tmp / "runs" / "local" / "rollouts.duckdb")
    got = rollouts(tmp / "runs" / "ray" / "rollouts.duckdb")
    assert got == expected and {r[1] for r in got} == {"weight", "harness", "eval"}
    assert {k: v for k, v in result.items() if k not in ("run_id", "run_dir")} == {
        k: v for k, v in local.items() if k not in ("run_id", "run_dir")}
    with get_client(sync_client=True) as client:
        flow_run = FlowRunFilter(id=FlowRunFilterId(any_=[on_ray.state_details.flow_run_id]))
        runs = client.read_task_runs(flow_run_filter=flow_run)
    batches = [r for r in runs if r.name.startswith("rollout_batch-")]
    # the test evaluations were split in two: shard [2] of each ran as its own task run
    assert any(r.name.endswith("[2]") for r in batches) and all(r.state.is_completed() for r in batches)
    assert any(r.name.startswith("rollout_batch-harness ") for r in batches)


def test_a_failed_ray_job_stops_the_run_and_the_other_jobs_are_stored(project):
    """A worker refuses a job for weights it does not load (never labels rollouts with other
    weights); the run raises naming that job, and the job that succeeded beside it is stored."""
    from tasks.parallel import RayDispatch
    from whale.run.conditions import get_condition
    from whale.run.context import Request, Run
    from whale.run.settings import load_settings
    from whale.store.keys import RolloutKey

    tmp, overrides = project
    overrides["parallel"] = {"engine": "ray", "workers": 2}
    settings = load_settings("params.yaml", None, overrides, "chess_puzzles")
    run = Run(settings, "chess_puzzles", get_condition("harness_only"), "r")
    try:
        run.dispatch = RayDispatch(settings.parallel)
        h0 = run.seed_harness()
        examples = run.domain.examples("harness")
        good = run.key(1, "harness", 1, h0, examples, 1, 7)
        stale = RolloutKey(**{**vars(good), "weights_id": "0" * 12, "step": 2})
        with pytest.raises(RuntimeError, match=r"rollout job 'stale \[1\]' failed on Ray.*stale weights"):
            run.rollouts([Request([(good, examples)], "good"), Request([(stale, examples)], "stale")])
        assert run.store.stored_rollouts(good) is not None
        assert run.store.stored_rollouts(stale) is None
    finally:
        run.close()
