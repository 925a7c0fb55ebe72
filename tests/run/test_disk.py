"""The disk estimate of a run's checkpoints: no smaller than what a trained checkpoint takes, and
counted per condition the way the flow writes them."""
from pathlib import Path

from tests.train.test_sft import chatml_rollout, make_trainer
from whale.run.conditions import get_condition
from whale.run.disk import DiskNeed, checkpoint_bytes, checkpoints_written, disk_need
from whale.run.settings import load_settings
from whale.train.checkpoint import checkpoint_dir, save_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def settings(**overrides):
    return load_settings(ROOT / "params.yaml", overrides=overrides, domain="search_qa")


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_a_trained_checkpoint_is_within_the_estimate(tiny_model_dir, tokenizer, tmp_path):
    trainer = make_trainer(tiny_model_dir, mini_batch=2, micro_batch=1)
    trainer.step([chatml_rollout(tokenizer, i, "What is 2+3?", "<tool_call>add(2, 3)</tool_call>", "5", "5")
                  for i in range(2)])  # the AdamW moments exist from the first optimizer step on
    ckpt = checkpoint_dir(tmp_path, trainer.global_step)
    save_checkpoint(trainer, ckpt)
    estimate = checkpoint_bytes(settings(), tiny_model_dir)
    # norms and biases are left out of the parameter count; nothing else should be
    assert 0.95 * estimate <= size(ckpt) <= 1.05 * estimate


def test_one_checkpoint_per_weight_phase_the_budget_buys():
    s = settings(schedule={"budget": 1920, "E": 0.5, "I": 3})
    # search QA's 32 weight examples at E 0.5: 4 steps of 16 rollouts; the harness phase of 16 examples
    # (I 3, M 2): 16 * 5 + the re-check of the top 1 with the incumbent, 1 sample each = 112
    assert checkpoints_written(s, get_condition("whale"), 32, 16) == -(-1920 // (64 + 112)) == 11
    assert checkpoints_written(s, get_condition("weight_only"), 32, 16) == 1920 // 64 == 30
    assert checkpoints_written(s, get_condition("harness_only"), 32, 16) == 0
    every = settings(schedule={"budget": 1920, "E": 0.5, "I": 3}, rsft={"checkpoint_every": 3})
    assert checkpoints_written(every, get_condition("weight_only"), 32, 16) == 30 * 2  # steps 3 and 4


def test_the_kept_ones_and_the_one_being_written_count_and_a_resumed_runs_own_do_not(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "runs" / "r"
    budget = {"budget": 640, "E": 0.5}  # 10 weight phases of 64 rollouts
    keep2 = disk_need(settings(schedule=budget, storage={"keep_checkpoints": 2}), get_condition("weight_only"), 32, 16,
                      tiny_model_dir, run_dir)
    assert keep2.written == 10 and keep2.at_once == 3 and keep2.needed == 3 * keep2.per_checkpoint
    assert keep2.free > 0 and "the newest 2 kept" in keep2.describe(2)
    every = disk_need(settings(schedule=budget), get_condition("weight_only"), 32, 16, tiny_model_dir, run_dir)
    assert every.at_once == every.written == 10
    (run_dir / "checkpoints" / "step-000004").mkdir(parents=True)
    (run_dir / "checkpoints" / "step-000004" / "model.safetensors").write_bytes(b"\0" * 1000)
    resumed = disk_need(settings(schedule=budget), get_condition("weight_only"), 32, 16, tiny_model_dir, run_dir)
    assert resumed.existing == 1000 and resumed.needed == every.needed - 1000


def test_a_need_above_the_free_space_names_the_setting():
    need = DiskNeed(per_checkpoint=2**30, written=11, at_once=11, existing=0, free=4 * 2**30)
    assert not need.fits and need.needed == 11 * 2**30
    assert "set storage.keep_checkpoints" in need.advice(Path("runs")) and "4.0 GiB free under runs" in need.advice(
        Path("runs"))
    assert DiskNeed(per_checkpoint=2**30, written=11, at_once=3, existing=0, free=4 * 2**30).fits
