"""storage.keep_checkpoints: a run keeps its newest N checkpoints and removes the rest whole."""
from pathlib import Path

import pytest

from tests.run.test_weight_sync import perturb
from whale.rollout.backends.hf import TransformersBackend
from whale.run.conditions import get_condition
from whale.run.context import Run
from whale.run.settings import SettingsError, load_settings
from whale.run.weights import Weights
from whale.train.checkpoint import checkpoint_weights_id, checkpoints, latest_checkpoint
from whale.train.rsft import RSFTConfig

ROOT = Path(__file__).resolve().parents[2]


def saved_weights(tmp_path, model_dir, keep: int, steps: int) -> tuple[Weights, list[str]]:
    weights = Weights(TransformersBackend(str(model_dir), max_batch=2), RSFTConfig(), model_dir, tmp_path / "run",
                      keep_checkpoints=keep)
    weights.start_training()
    ids = []
    for step in range(1, steps + 1):
        perturb(weights.trainer.model, 0.01 * step)  # what an RSFT step does, as far as a checkpoint can tell
        weights._publish()
        ids.append(weights.save(step))
        weights.prune()
    return weights, ids


def test_the_newest_n_are_kept_and_the_rest_removed_whole(tmp_path, tiny_model_dir):
    weights, ids = saved_weights(tmp_path, tiny_model_dir, keep=2, steps=4)
    root = weights.ckpt_root
    assert [c.name for c in checkpoints(root)] == ["step-000004", "step-000003"]
    assert sorted(p.name for p in root.iterdir()) == ["step-000003", "step-000004"]  # no .removed left
    assert [checkpoint_weights_id(c) for c in checkpoints(root)] == ids[:1:-1]
    newest = latest_checkpoint(root)
    assert newest.name == "step-000004" and checkpoint_weights_id(newest) == weights.id


def test_zero_keeps_every_checkpoint(tmp_path, tiny_model_dir):
    weights, _ = saved_weights(tmp_path, tiny_model_dir, keep=0, steps=3)
    assert len(checkpoints(weights.ckpt_root)) == 3 and weights.prune() == []


def test_a_removal_interrupted_midway_leaves_no_checkpoint_that_looks_complete(tmp_path, tiny_model_dir, monkeypatch):
    weights, _ = saved_weights(tmp_path, tiny_model_dir, keep=0, steps=2)
    weights.keep_checkpoints = 1
    import whale.run.weights as module

    def killed(path, *args, **kwargs):
        raise KeyboardInterrupt  # stopped after the rename, in the deletion

    monkeypatch.setattr(module.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        weights.prune()
    assert [c.name for c in checkpoints(weights.ckpt_root)] == ["step-000002"]
    assert (weights.ckpt_root / "step-000001.removed").is_dir()
    monkeypatch.undo()
    weights.prune()  # the next prune clears what the interrupted one left
    assert sorted(p.name for p in weights.ckpt_root.iterdir()) == ["step-000002"]


def test_a_stagewise_run_refuses_to_prune_before_it_writes_anything(tmp_path):
    keep = {"storage": {"keep_checkpoints": 2}}
    settings = load_settings(ROOT / "params.yaml", overrides=keep, domain="math_reasoning")
    with pytest.raises(SettingsError, match="keep_checkpoints 2: condition stagewise .* set it to 0"):
        Run(settings, "math_reasoning", get_condition("stagewise"), "sw", tmp_path)
    assert not any(tmp_path.iterdir())
