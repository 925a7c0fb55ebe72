"""RSFT trainer: masks, loss normalisation, persistence across steps and checkpoints, epoch accounting."""
from __future__ import annotations

import shutil
from unittest.mock import patch

import pytest
import torch

from whale.model import weights_id
from whale.train import loss
from whale.train.checkpoint import checkpoint_dir, latest_checkpoint, save_checkpoint
from whale.train.loss import target_nll
from whale.train.rsft import IGNORE, RSFTConfig, RSFTTrainer, rollout_row, steps_for_epochs
from whale.types import Rollout

SYSTEM = "<|im_start|>system\nYou are a careful assistant.<|im_end|>\n"


def chatml_rollout(tokenizer, idx: int, question: str, call: str, tool_out: str, answer: str) -> Rollout:
    """A two-turn tool episode as the engine records it: glue and observations 0, generated tokens 1."""
    segments = [
        (SYSTEM + f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n", 0),
        (f"{call}<|im_end|>", 1),  # the model's own end-of-turn token is generated, so it is trained
        (f"\n<|im_start|>user\n<tool_response>{tool_out}</tool_response><|im_end|>\n<|im_start|>assistant\n", 0),
        (f"{answer}<|im_end|>", 1),
    ]
    ids, mask = [], []
    for text, bit in segments:
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece
        mask += [bit] * len(piece)
    return Rollout(run_id="test", cycle=0, phase="weight", step=0, split="weight", example_id=f"ex{idx}",
                   sample_idx=0, harness_id="h0", weights_id="w0", seed=0, reward=1.0, token_ids=ids, mask=mask)


@pytest.fixture(scope="module")
def rollouts(tokenizer) -> list[Rollout]:
    """Four accepted rollouts of clearly different lengths and generated-token counts."""
    return [
        chatml_rollout(tokenizer, 0, "What is 2+3?", "<tool_call>add(2, 3)</tool_call>", "5", "\\boxed{5}"),
        chatml_rollout(tokenizer, 1, "Find the capital of France.", "<search>capital of France</search>",
                       "Paris is the capital and largest city of France, on the Seine.",
                       "The passage says Paris is the capital, so the answer is <answer>Paris</answer>."),
        chatml_rollout(tokenizer, 2, "Mate in one.", "<move>Qh7</move>", "illegal move", "<move>Qh5</move>"),
        chatml_rollout(tokenizer, 3, "Compute 17*23 with Python.",
                       "<code>print(17 * 23)</code> I will run this program to multiply the two numbers.",
                       "391", "The program printed 391, therefore the product is \\boxed{391}."),
    ]


def make_trainer(model_dir, **overrides) -> RSFTTrainer:
    settings = {"lr": 1e-3, "mini_batch": 4, "micro_batch": 2, "max_seq_len": 512, "seed": 7, **overrides}
    return RSFTTrainer(model_dir, RSFTConfig(**settings))


def hand_nll(model, rollouts) -> tuple[torch.Tensor, int]:
    """Summed NLL of every mask-1 token, one unpadded sequence at a time, from plain logits."""
    total, count = torch.zeros(()), 0
    for r in rollouts:
        ids = torch.tensor([r.token_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        target = ids[0, 1:]
        picked = -logp.gather(1, target[:, None])[:, 0]
        keep = torch.tensor(r.mask[1:], dtype=torch.bool)
        total = total + picked[keep].sum()
        count += int(keep.sum())
    return total, count


def token_mean_nll(trainer, rollouts) -> float:
    """The token-mean NLL over the mask-1 tokens under the trainer's current weights (no update)."""
    with torch.no_grad():
        total, count = hand_nll(trainer.model, rollouts)
    return float(total / count)


def test_one_step_changes_every_parameter_and_lowers_the_loss(tiny_model_dir, rollouts):
    trainer = make_trainer(tiny_model_dir)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    loss_before = token_mean_nll(trainer, rollouts)
    out = trainer.step(rollouts)
    assert out.skipped is False and out.accepted == 4 and out.optimizer_steps == 1
    assert out.tokens == sum(sum(r.mask[1:]) for r in rollouts)
    assert sorted(out.order) == [0, 1, 2, 3] and trainer.global_step == 1
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(p.detach(), before[n])]
    assert unchanged == []
    assert token_mean_nll(trainer, rollouts) < loss_before - 1e-3


def test_mask_is_honoured_token_by_token(tiny_model_dir, rollouts, tokenizer):
    trainer = make_trainer(tiny_model_dir)
    r = rollouts[1]
    assert r.mask.count(1) > 0 and r.mask.count(0) > 0
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    # Both assistant turns end with a trained <|im_end|>; the glue's <|im_end|> tokens are not trained.
    assert [m for t, m in zip(r.token_ids, r.mask, strict=False) if t == im_end] == [0, 0, 1, 0, 1]
    batch = trainer.trainer.data_collator([rollout_row(r, trainer.config.max_seq_len)[0]])
    labels = batch["labels"][0].tolist()
    assert labels == [t if m == 1 else IGNORE for t, m in zip(r.token_ids, r.mask, strict=False)]
    with torch.no_grad():
        hidden = trainer.model.model(input_ids=batch["input_ids"],
                                     attention_mask=batch["attention_mask"]).last_hidden_state
        nll, n = target_nll(hidden, batch["labels"], trainer.model.get_output_embeddings())
        # position t-1 scores token t: the loss's targets are exactly the mask-1 tokens after the first
        assert n == sum(r.mask[1:])
        # and their NLL is the hand-computed one, through the model's own LM head
        total, count = hand_nll(trainer.model, [r])
        assert count == n and torch.allclose(nll, total, rtol=1e-5)


def test_past_chunk_rows_the_projection_is_chunked_with_the_same_loss_and_gradient(tiny_model_dir, rollouts):
    trainer = make_trainer(tiny_model_dir)
    # float64: chunking only changes the order of the sums, and in float32 that order (which also
    # moves with torch's thread count) leaves differences near 1e-7 that say nothing about the code
    trainer.model.double()
    batch = trainer.trainer.data_collator([rollout_row(r, trainer.config.max_seq_len)[0] for r in rollouts[:2]])
    head = trainer.model.get_output_embeddings()
    results = []
    for rows in (loss.CHUNK_ROWS, 5):
        trainer.model.zero_grad()
        hidden = trainer.model.model(input_ids=batch["input_ids"],
                                     attention_mask=batch["attention_mask"]).last_hidden_state
        with patch.object(loss, "CHUNK_ROWS", rows):
            nll, n = target_nll(hidden, batch["labels"], head)
        assert n > 3 * 5
        nll.backward()
        results.append((nll.detach(), {k: p.grad.clone() for k, p in trainer.model.named_parameters()}))
    (whole, want), (chunked, got) = results
    torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-10)
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-8, atol=1e-12, msg=f"gradient of {name}")


def test_loss_is_total_nll_over_total_tokens_of_the_mini_batch(tiny_model_dir, rollouts):
    trainer = make_trainer(tiny_model_dir, lr=3e-2, mini_batch=4, micro_batch=2, max_grad_norm=0.0)
    for _ in range(4):  # make rollout 2 much easier than the others, so the two normalisations disagree
        trainer.step([rollouts[2]])
    rollouts = [rollouts[i] for i in (2, 0, 1, 3)]  # micro-batches: (easy, short) and (long, long)
    model = trainer.model
    total, count = hand_nll(model, rollouts)
    expected = total / count
    value = float(expected.detach())
    with torch.no_grad():
        micro_means = [hand_nll(model, rollouts[i:i + 2]) for i in (0, 2)]
    mean_of_means = sum(t / c for t, c in micro_means) / 2
    assert abs(float(mean_of_means) - value) > 0.3  # the test can tell the two rules apart
    model.zero_grad()
    expected.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    loss, tokens = trainer._accumulate([rollout_row(r, trainer.config.max_seq_len)[0] for r in rollouts])
    assert tokens == count
    assert loss == pytest.approx(value, rel=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-4, atol=1e-7, msg=f"gradient of {n}")
    model.zero_grad()
    out = trainer.step(rollouts)  # shuffled order, same mini-batch: same token mean
    assert out.optimizer_steps == 1 and out.loss == pytest.approx(value, rel=1e-5)


def test_optimizer_and_data_order_survive_a_checkpoint(tiny_model_dir, rollouts, tmp_path):
    first = make_trainer(tiny_model_dir, mini_batch=2, micro_batch=1)
    first.step(rollouts[:3])
    ckpt = checkpoint_dir(tmp_path, first.global_step)
    wid = save_checkpoint(first, ckpt)
    assert wid == weights_id(ckpt) and latest_checkpoint(tmp_path) == ckpt
    resumed = RSFTTrainer.from_checkpoint(ckpt, first.config)
    assert resumed.global_step == first.global_step == 2
    moments = first.trainer.optimizer.state_dict()["state"]
    restored = resumed.trainer.optimizer.state_dict()["state"]
    assert moments.keys() == restored.keys()
    for k in moments:
        assert torch.equal(moments[k]["exp_avg_sq"], restored[k]["exp_avg_sq"])
    # load_state into a trainer built from other weights (and recomputing activations) resumes the same way.
    other = make_trainer(tiny_model_dir, mini_batch=2, micro_batch=1, activation_checkpointing=True)
    other.load_state(ckpt)
    a, b, c = first.step(rollouts), resumed.step(rollouts), other.step(rollouts)
    assert a.order == b.order == c.order and a.loss == pytest.approx(b.loss, rel=1e-6)
    assert c.loss == pytest.approx(a.loss, rel=1e-5)
    for p, q, r in zip(first.model.parameters(), resumed.model.parameters(), other.model.parameters(), strict=False):
        assert torch.allclose(p, q, atol=1e-7) and torch.allclose(p, r, atol=1e-6)
    # A trainer that did not load the state would shuffle and update differently.
    fresh = make_trainer(ckpt, mini_batch=2, micro_batch=1)
    fresh.step(rollouts)
    pairs = zip(first.model.parameters(), fresh.model.parameters(), strict=True)
    assert any(not torch.allclose(p, q) for p, q in pairs)


def test_empty_step_is_skipped(tiny_model_dir):
    trainer = make_trainer(tiny_model_dir)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    out = trainer.step([])
    assert out.skipped is True and out.optimizer_steps == 0 and out.loss is None
    assert trainer.global_step == 0
    assert all(torch.equal(p, q) for p, q in zip(trainer.model.parameters(), before, strict=False))


def test_bad_rollouts_are_refused(tiny_model_dir, rollouts):
    trainer = make_trainer(tiny_model_dir)
    broken = Rollout(**{**rollouts[0].__dict__, "mask": rollouts[0].mask[:-1]})
    with pytest.raises(ValueError, match="ex0#0"):
        trainer.step([broken])


def test_checkpoint_write_is_atomic_and_latest_ignores_partial_dirs(tiny_model_dir, tmp_path):
    trainer = make_trainer(tiny_model_dir)
    assert latest_checkpoint(tmp_path) is None
    save_checkpoint(trainer, checkpoint_dir(tmp_path, 3))
    (tmp_path / "step-000009.tmp").mkdir()  # a crash mid-write
    (tmp_path / "step-000007").mkdir()  # incomplete: no metadata
    assert latest_checkpoint(tmp_path) == tmp_path / "step-000003"
    wid = save_checkpoint(trainer, checkpoint_dir(tmp_path, 3))  # rewrite in place
    assert wid == weights_id(tmp_path / "step-000003")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000003", "step-000007", "step-000009.tmp"]


def test_a_checkpoint_of_unchanged_weights_shares_the_earlier_ones_files(tiny_model_dir, rollouts, tmp_path):
    trainer = make_trainer(tiny_model_dir, mini_batch=2, micro_batch=1)
    first, second, third = (checkpoint_dir(tmp_path, s) for s in (1, 2, 3))
    save_checkpoint(trainer, first)
    assert trainer.step([]).skipped  # a weight phase that accepted nothing
    wid = save_checkpoint(trainer, second)
    weights = "model.safetensors"
    assert (second / weights).stat().st_ino == (first / weights).stat().st_ino
    shutil.rmtree(first)  # removing one leaves the other whole
    assert weights_id(second) == wid and latest_checkpoint(tmp_path) == second
    resumed = RSFTTrainer.from_checkpoint(second, trainer.config)
    assert all(torch.equal(p, q) for p, q in zip(trainer.model.parameters(), resumed.model.parameters(), strict=True))
    trainer.step(rollouts[:3])
    assert save_checkpoint(trainer, third) != wid
    assert (third / weights).stat().st_nlink == 1 and (second / weights).stat().st_nlink == 1


def test_steps_for_epochs_rounds_half_up():
    assert steps_for_epochs(0.6, 18946, 256) == 44
    assert steps_for_epochs(0.2, 18946, 256) == 15
    assert steps_for_epochs(0.6, 16384, 256) == 38
    assert steps_for_epochs(0.2, 16384, 256) == 13
    assert steps_for_epochs(0.5, 20, 4) == 3  # 2.5 -> 3, where round() would give 2
    assert steps_for_epochs(0.01, 12, 4) == 1 and steps_for_epochs(0, 12, 4) == 0
    with pytest.raises(ValueError):
        steps_for_epochs(1.0, 3, 4)


def test_config_refuses_bad_batches():
    with pytest.raises(ValueError):
        RSFTConfig(mini_batch=2, micro_batch=4)


@pytest.mark.slow
def test_two_real_steps_on_smollm(smollm_dir, rollouts, tmp_path):
    trainer = RSFTTrainer(smollm_dir, RSFTConfig(lr=1e-4, mini_batch=4, micro_batch=2, seed=0))
    loss_before = token_mean_nll(trainer, rollouts)
    outs = [trainer.step(rollouts) for _ in range(2)]
    assert [o.optimizer_steps for o in outs] == [1, 1]
    assert token_mean_nll(trainer, rollouts) < loss_before
    assert save_checkpoint(trainer, checkpoint_dir(tmp_path, 2)) != weights_id(smollm_dir)


STEP_IN_A_PROCESS = """
import pickle, sys, torch
from whale.model import model_weights_id
from whale.train.rsft import RSFTConfig, RSFTTrainer
model_dir, data, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
trainer = RSFTTrainer(model_dir, RSFTConfig(lr=1e-3, mini_batch=4, micro_batch=2, max_seq_len=512, seed=7))
rollouts = pickle.load(open(data, "rb"))
losses = [trainer.step(rollouts).loss for _ in range(2)]
print(repr(losses), model_weights_id(trainer.model))
"""


def test_the_same_steps_give_the_same_weights_in_another_process_and_thread_count(tiny_model_dir, rollouts,
                                                                                  tmp_path):
    """Same seed, same data: bit-identical weights, whatever the process or the number of threads."""
    import pickle
    import subprocess
    import sys

    data = tmp_path / "rollouts.pkl"
    data.write_bytes(pickle.dumps(rollouts))
    outs = [subprocess.run([sys.executable, "-c", STEP_IN_A_PROCESS, str(tiny_model_dir), str(data), str(threads)],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            for threads in (1, 2)]
    assert outs[0] == outs[1], outs
