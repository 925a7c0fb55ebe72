"""What the backend tests share: a perturbed copy of a checkpoint, chat requests, result equality."""
from __future__ import annotations

from pathlib import Path

from whale.rollout.backends.base import GenRequest
from whale.rollout.chat import ChatFormat

TEXTS = ["hi", "what is two plus two?", "name a colour " * 3, "a much longer question " * 6, "ok"]


def perturbed(model_dir: Path, out: Path) -> Path:
    """A second checkpoint at ``out``: the model with noise added to every weight."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(1)) * 0.5)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return out


def chat_requests(tokenizer) -> list[GenRequest]:
    """Five chat prompts of varied length, each with its own token limit and seed."""
    chat = ChatFormat(tokenizer)
    return [GenRequest(chat.opening([{"role": "user", "content": t}]), 6 + 2 * i, seed=100 + i)
            for i, t in enumerate(TEXTS)]


def same(a, b) -> bool:
    return [(r.ids, r.finish) for r in a] == [(r.ids, r.finish) for r in b]
