"""The RSFT loss: summed NLL of the target tokens only, through the LM head of those positions only.

TRL's fused LM head scores only the target positions where Triton runs; elsewhere (CPU) it scores
every position, prompt and padding included, and computes entropy and top-1 statistics on each
(measured on SmolLM2, 16 rollouts of 163 tokens, half of them targets: 41 % of an RSFT step in its
chunked function). RSFT logs neither, and most of a rollout is prompt and tool output, so this
loss projects only the rows whose next token is a target: ``(rows, vocab)`` logits in chunks,
each recomputed in the backward pass when there is more than one.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from trl import SFTTrainer

from whale.train.rsft import IGNORE

# Target rows per projection: 2048 x 49152 float32 logits are 400 MB (SmolLM2's vocabulary).
CHUNK_ROWS = 2048


def _chunk_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               targets: torch.Tensor) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias).float()
    return F.cross_entropy(logits, targets, reduction="sum")


def target_nll(hidden: torch.Tensor, labels: torch.Tensor, head: torch.nn.Linear) -> tuple[torch.Tensor, int]:
    """Summed NLL of every target token and their count. ``hidden``: final hidden states
    ``(batch, seq, dim)``; ``labels``: ``(batch, seq)``, IGNORE where not trained. Position t-1
    scores token t. An all-ignored batch gives a zero that is still part of the graph."""
    targets = labels[:, 1:]
    mask = targets != IGNORE
    rows, targets = hidden[:, :-1][mask], targets[mask]
    n = int(targets.numel())
    if n <= CHUNK_ROWS:
        return _chunk_nll(rows, head.weight, head.bias, targets), n
    parts = [checkpoint(_chunk_nll, rows[s:s + CHUNK_ROWS], head.weight, head.bias, targets[s:s + CHUNK_ROWS],
                        use_reentrant=False) for s in range(0, n, CHUNK_ROWS)]
    return torch.stack(parts).sum(), n


class TargetRowsTrainer(SFTTrainer):
    """TRL's SFTTrainer with the target-rows loss; everything else (collator, training step,
    optimizer, accelerate/DDP wrapping) is TRL's."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        features = {k: v for k, v in inputs.items() if k != "labels"}
        # The model is called through its (possibly DDP) wrapper so gradient sync stays DDP's; it
        # projects only its last position, and the loss reads the final hidden states.
        out = model(**features, use_cache=False, output_hidden_states=True, logits_to_keep=1)
        head = self.accelerator.unwrap_model(model).get_output_embeddings()
        total, n = target_nll(out.hidden_states[-1], inputs["labels"], head)
        loss = total / max(int(num_items_in_batch) if num_items_in_batch is not None else n, 1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            # num_items_in_batch counts every process's tokens and DDP averages the gradients
            loss = loss * self.accelerator.num_processes
        return (loss, out) if return_outputs else loss
