"""prefect.yaml: one deployment of the `whale` flow per condition; and, end to end, a real Prefect
server, the process work pool, `prefect deploy`, `prefect deployment run` and a worker running
the flow on the tiny model in a scratch project directory."""
from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import httpx
import pytest
import yaml

from whale.testing import make_project

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_prefect_yaml_has_one_deployment_per_condition():
    from flows.whale import whale
    from whale.run.conditions import CONDITIONS

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == set(CONDITIONS)
    accepted = set(inspect.signature(whale.fn).parameters)
    for name, d in deployments.items():
        assert d["parameters"] == {"domain": "math_reasoning", "condition": name}
        assert set(d["parameters"]) <= accepted
        assert d["entrypoint"] == "flows/whale.py:whale"
        assert d["work_pool"]["name"] == "whale-pool"
    (step,) = spec["pull"]
    assert step["prefect.deployments.steps.set_working_directory"]["directory"] == "{{ project-dir.stdout }}"
    (build,) = spec["build"]
    assert build["prefect.deployments.steps.run_shell_script"]["id"] == "project-dir"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`prefect server start` on a free loopback port with its own PREFECT_HOME; yields the env for clients."""
    home = tmp_path_factory.mktemp("prefect_home")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api,
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "TOKENIZERS_PARALLELISM": "false"}
    log = (home / "server.log").open("w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).json() is True:
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (home / "server.log").read_text()[-3000:]
                raise RuntimeError(f"prefect server did not become healthy:\n{tail}")
            time.sleep(1)
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and anything it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def prefect(env: dict, cwd: Path, *args: str, timeout: int = 300) -> str:
    r = subprocess.run([str(BIN / "prefect"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, (f"prefect {' '.join(args)} failed ({r.returncode}):\n"
                               f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r.stdout + r.stderr


@pytest.mark.slow
def test_deployment_runs_the_flow_through_a_process_worker(server, tmp_path, tiny_model_dir):
    env, api = server, server["PREFECT_API_URL"]
    project = tmp_path / "project"  # params.yaml, data/ and the runs live here, not in the checkout
    project.mkdir()
    (project / "flows").symlink_to(ROOT / "flows")
    shutil.copy(ROOT / "prefect.yaml", project / "prefect.yaml")
    overrides = make_project(project, tiny_model_dir)
    overrides["schedule"]["budget"] = 2  # harness_only, h0 re-evaluated and the budget spent: no proposer

    prefect(env, project, "work-pool", "create", "whale-pool", "--type", "process")
    prefect(env, project, "--no-prompt", "deploy", "-n", "harness_only")
    dep = httpx.get(f"{api}/deployments/name/whale/harness_only").json()
    assert dep["work_pool_name"] == "whale-pool" and dep["entrypoint"] == "flows/whale.py:whale"
    assert dep["parameters"] == {"domain": "math_reasoning", "condition": "harness_only"}
    assert dep["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(project)}}]

    params = {"domain": "chess_puzzles", "overrides": overrides}
    out = prefect(env, project, "deployment", "run", "whale/harness_only", "--params", json.dumps(params))
    flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
    # the worker starts elsewhere: the pull step must move the flow run into the project
    worker = prefect(env, tmp_path, "worker", "start", "--pool", "whale-pool", "--run-once", "--limit", "1",
                     timeout=600)
    run = httpx.get(f"{api}/flow_runs/{flow_run_id}").json()
    assert run["state_type"] == "COMPLETED", worker[-4000:]
    assert run["parameters"]["condition"] == "harness_only" and run["parameters"]["domain"] == "chess_puzzles"

    con = duckdb.connect(str(project / "runs" / "chess_puzzles-harness_only" / "rollouts.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT domain, condition FROM runs").fetchall() == [("chess_puzzles", "harness_only")]
        evals = con.execute("SELECT cycle, phase, n_examples, k FROM evals ORDER BY cycle").fetchall()
        assert evals == [(0, "start", 2, 1), (1, "harness", 2, 1)]
        phases = con.execute("SELECT phase, reason FROM phases").fetchall()
        assert phases == [("harness", "budget: 2 of 2 rollouts spent")]
        by_split = dict(con.execute("SELECT split, count(*) FROM rollouts GROUP BY split").fetchall())
        assert by_split == {"test": 2, "harness": 2}  # the second test evaluation re-read the first
    finally:
        con.close()
