"""A SIGTERM or Ctrl-C whose exit something swallows on its way up still stops the command and fails it."""
import os
import signal
import time

import pytest

from whale.run import stop
from whale.testing import ROOT


@pytest.fixture()
def default_sigterm():
    """``main`` installs its handlers only over the default ones; give them back afterwards."""
    old = signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, signal.default_int_handler)
    stop.clear()
    yield
    signal.signal(signal.SIGTERM, old[0])
    signal.signal(signal.SIGINT, old[1])
    stop.clear()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_swallowed_exit_still_fails_the_command(monkeypatch, capsys, default_sigterm, sig):
    import whale.cli as cli

    real = cli._module
    went_on = []

    class Swallowing:
        """A command whose library catches BaseException around the moment the signal lands."""

        add_arguments = staticmethod(real("sql").add_arguments)

        @staticmethod
        def run(args, settings):
            try:
                os.kill(os.getpid(), sig)
                time.sleep(5)  # the handler raises in here
            except BaseException:  # noqa: BLE001 (what such a library does)
                pass
            went_on.append(True)

    monkeypatch.setattr(cli, "_module", lambda name: Swallowing if name == "sql" else real(name))
    assert cli.main(["--params", str(ROOT / "params.yaml"), "sql", "SELECT 1"]) == 128 + sig
    assert went_on and f"whale: stopped by {sig.name}" in capsys.readouterr().err


def test_a_recorded_stop_is_raised_again_with_the_signals_status(default_sigterm):
    stop.raise_if_stopped()  # nothing asked: nothing raised
    stop.request_stop(signal.SIGTERM)
    stop.request_stop(signal.SIGINT)
    assert stop.stop_requested() == signal.SIGTERM
    with pytest.raises(SystemExit) as e:
        stop.raise_if_stopped()
    assert e.value.code == 128 + signal.SIGTERM
