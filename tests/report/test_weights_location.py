"""Where the report says a run's weights live: only a checkpoint still on disk is named."""
from tests.report.test_report import DOMAIN, W0, W2, build_weight_only
from whale.report.analysis import weights_location
from whale.report.data import load_runs


def test_a_weights_command_names_only_a_checkpoint_on_disk(tmp_path):
    build_weight_only(tmp_path)  # its phases name step-000002 and step-000004, neither on disk
    (run,), _ = load_runs(tmp_path)
    assert weights_location(run, W2, W0) is None and weights_location(run, W0, W0) == "data/model"
    ckpt = tmp_path / f"{DOMAIN}-weight_only" / "checkpoints" / "step-000004"
    ckpt.mkdir(parents=True)  # the phase row's checkpoint, metadata lost: still named by the phase
    assert weights_location(run, W2, W0) == str(ckpt)
