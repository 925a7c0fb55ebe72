"""Data-parallel RSFT over 2 gloo processes on CPU equals one process: loss, weights, optimizer state."""
import pytest
import torch

from tests.train.test_sft import chatml_rollout
from whale.train.checkpoint import checkpoint_dir, save_checkpoint
from whale.train.parallel import DataParallelTrainer, make_trainer
from whale.train.rsft import RSFTConfig, RSFTTrainer


def five_rollouts(tokenizer):
    """Five rollouts: with mini-batch 4 and micro-batch 1, the second mini-batch has one micro-batch,
    so the second process makes an empty pass to keep the reduction in step."""
    texts = [("What is 2+3?", "<tool_call>add(2, 3)</tool_call>", "5", "\\boxed{5}"),
             ("Capital of France?", "<search>capital of France</search>", "Paris is the capital.", "<answer>Paris"),
             ("Mate in one.", "<move>Qh7</move>", "illegal move", "<move>Qh5</move>"),
             ("17*23?", "<code>print(17 * 23)</code> run it", "391", "so \\boxed{391}"),
             ("Longest river?", "<search>longest river</search>", "The Nile is long.", "<answer>Nile")]
    return [chatml_rollout(tokenizer, i, *t) for i, t in enumerate(texts)]


def trajectory(trainer, rollouts, ckpt) -> dict:
    """Two steps, a checkpoint, a step off the path, the checkpoint reloaded, one more step."""
    losses = [trainer.step(rollouts).loss for _ in range(2)]
    state = {k: v["exp_avg_sq"].clone() for k, v in trainer.trainer.optimizer.state_dict()["state"].items()}
    after_two = [p.detach().clone() for p in trainer.model.parameters()]
    save_checkpoint(trainer, ckpt)
    trainer.step(rollouts[:4])
    trainer.load_state(ckpt)
    last = trainer.step(rollouts)
    return {"losses": losses + [last.loss], "order": last.order, "global_step": last.global_step,
            "exp_avg_sq": state, "after_two": after_two,
            "end": [p.detach().clone() for p in trainer.model.parameters()]}


def test_two_gloo_processes_give_the_loss_weights_and_optimizer_state_of_one(tiny_model_dir, tokenizer, tmp_path):
    rollouts = five_rollouts(tokenizer)
    config = dict(lr=1e-3, mini_batch=4, micro_batch=1, max_seq_len=512, seed=7)
    start = [p.detach().clone() for p in RSFTTrainer(tiny_model_dir, RSFTConfig(**config)).model.parameters()]
    one = trajectory(RSFTTrainer(tiny_model_dir, RSFTConfig(**config)), rollouts, checkpoint_dir(tmp_path / "a", 2))
    two_trainer = make_trainer(tiny_model_dir, RSFTConfig(**config, processes=2))
    try:
        assert isinstance(two_trainer, DataParallelTrainer) and two_trainer.trainer.accelerator.num_processes == 2
        two = trajectory(two_trainer, rollouts, checkpoint_dir(tmp_path / "b", 2))
    finally:
        two_trainer.close()
    assert not any(w.is_alive() for w in two_trainer.workers)

    assert (one["order"], one["global_step"]) == (two["order"], two["global_step"])
    for a, b in zip(one["losses"], two["losses"], strict=True):
        assert abs(a - b) < 1e-5, (one["losses"], two["losses"])
    for key in ("after_two", "end"):
        for p1, p2 in zip(one[key], two[key], strict=True):
            torch.testing.assert_close(p1, p2, atol=2e-6, rtol=1e-5)
    for k, v in one["exp_avg_sq"].items():
        torch.testing.assert_close(v, two["exp_avg_sq"][k], atol=1e-9, rtol=1e-4)
    # the comparison is between trained models: every tensor moved away from the start
    assert all(not torch.equal(p0, p) for p0, p in zip(start, two["after_two"], strict=True))


def test_a_dead_worker_is_named_instead_of_waited_for(tiny_model_dir, tokenizer):
    trainer = make_trainer(tiny_model_dir, RSFTConfig(lr=1e-3, mini_batch=4, micro_batch=1, processes=2))
    try:
        trainer.workers[0].kill()
        trainer.workers[0].join()
        with pytest.raises(RuntimeError, match="rsft-rank1 died"):
            trainer.step(five_rollouts(tokenizer))
    finally:
        trainer.close()
