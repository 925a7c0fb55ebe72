"""Shared fixtures: the SmolLM2 tokenizer, a tiny randomly initialised model built on it, a canary."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".pytest_cache" / "whale"


@pytest.fixture
def canary(tmp_path, monkeypatch) -> Path:
    """A gold-answer file on the host and an API key in the environment, both marked CANARY:
    an attack that reaches either shows the marker in what it leaves behind."""
    secret = tmp_path / "test.jsonl"
    secret.write_text('{"gold": "CANARY-GOLD-7731"}')
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-CANARY-KEY-5521")
    return secret


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
    from whale.testing import tiny_model

    return tiny_model(tokenizer_dir, tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def smollm_dir() -> Path:
    """The real SmolLM2-135M export (slow tests only); exported on first use."""
    from whale.model import export_model

    out = ROOT / "data" / "model"
    if not (out / "model.safetensors").exists():
        export_model("embedded", out)
    return out


def pytest_sessionfinish(session, exitstatus):
    """Stop Prefect's temporary server while the output streams are open. Its own atexit hook
    logs "Stopping temporary server" after pytest has closed them, which printed a
    "--- Logging error ---" traceback at the end of every run."""
    import sys

    server = sys.modules.get("prefect.server.api.server")
    if server is None:
        return
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)  # run logs still queued for the server go out before it stops
    for instance in list(server.SubprocessASGIServer._instances.values()):
        instance.stop()


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The interpreter of the vLLM server's venv (`make vllm`; WHALE_VLLM_PYTHON names another)."""
    python = os.environ.get("WHALE_VLLM_PYTHON", str(ROOT / ".venv-vllm" / "bin" / "python"))
    if not Path(python).exists():
        pytest.fail(f"{python} is missing: build the vLLM server's venv with `make vllm` (make test does)")
    return python


@pytest.fixture(scope="session")
def vllm_tiny_dir(tokenizer_dir, tmp_path_factory) -> Path:
    """The tiny model as vLLM's CPU attention takes it (heads of 32 dimensions), with untied, wide
    random weights: greedy output depends on the prompt, with clear margins between tokens."""
    from whale.testing import tiny_model

    return tiny_model(tokenizer_dir, tmp_path_factory.mktemp("vllm_tiny"), hidden=128, init=1.0, tied=False)
