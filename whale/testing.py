"""Test and benchmark helpers: a tiny randomly initialised model on a real tokenizer, and a scratch
project (params.yaml, prepared data, overrides that make a run tiny). Used by tests/ and bench/."""
from __future__ import annotations

from pathlib import Path

from domains import get_domain

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"weight": 4, "harness": 2, "test": 2}


def make_project(tmp: Path, model_dir: Path, domains=("chess_puzzles",)) -> dict:
    """Write params.yaml and data/ under ``tmp``; return the overrides that make runs tiny. The tiny
    model runs on the transformers engine (the reference; vLLM's CPU attention wants larger heads),
    in the overrides and in the copied params.yaml, which ``whale`` commands run there read."""
    text = (ROOT / "params.yaml").read_text()
    (tmp / "params.yaml").write_text(text.replace("\n  kind: vllm\n", "\n  kind: transformers\n"))
    for name in domains:
        get_domain(name, str(tmp / "data")).prepare(SIZES, 0)
    return {
        "model": {"export_dir": str(model_dir)},
        "data": {name: SIZES for name in domains},
        "rsft": {"prompt_batch": 2, "k": 2, "mini_batch": 4, "micro_batch": 2, "lr": 1e-3},
        "harness_search": {"M": 1, "smoke_examples": 1,
                           "h0": str(ROOT / "harnesses" / "examples" / "chess_choice.py")},
        "schedule": {"E": 0.5, "I": 2, "budget": 16},
        "eval": {"k": 1, "every": 8},
        "backend": {"kind": "transformers", "max_batch": 8},
    }


def tiny_model(tokenizer_dir: str | Path, out: str | Path, hidden: int = 64, init: float | None = None,
               tied: bool = True) -> Path:
    """A 2-layer Llama with random weights (seed 0) and the given tokenizer, saved like an export.
    ``hidden`` 128 gives heads of 32 dimensions, the smallest vLLM's CPU attention supports; ``init``
    (the initializer range) near 1 with untied embeddings gives prompt-dependent greedy output
    with clear margins, which comparisons of two engines need."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=tied, **({"initializer_range": init} if init is not None else {}),
    )
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return Path(out)
