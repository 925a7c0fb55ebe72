"""Shared fixtures: the SmolLM2 tokenizer and a tiny randomly initialised model built on it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".pytest_cache" / "whale"


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    """The SmolLM2 tokenizer, read once from the embedded GGUF and cached on disk."""
    from transformers import AutoTokenizer

    from whale.model import embedded_gguf

    out = CACHE / "tokenizer"
    if not (out / "tokenizer.json").exists():
        gguf = embedded_gguf()
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_model_dir(tokenizer_dir, tmp_path_factory) -> Path:
    """A 2-layer Llama with random weights and the SmolLM2 tokenizer, saved like an export."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    out = tmp_path_factory.mktemp("tiny_model")
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def smollm_dir() -> Path:
    """The real SmolLM2-135M export (slow tests only); exported on first use."""
    from whale.model import export_model

    out = ROOT / "data" / "model"
    if not (out / "model.safetensors").exists():
        export_model("embedded", out)
    return out
