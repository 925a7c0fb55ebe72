"""The checkpoint a vLLM server loads and reloads: the trainer's, with tied embeddings untied.

vLLM reloads weights in place layer by layer, and a layer for which the checkpoint holds no tensor
keeps the kernel copy it made at the first load. A model with tied input and output embeddings
(SmolLM2 among them) stores no ``lm_head.weight``, so after a reload its output head kept the
first weights: on SmolLM2 one RSFT step left the served log-probabilities 0.0075 nats from the
trainer's, about a sixth of what the step moved them (``bench/gpu_check.py --vllm``). The server
therefore serves a copy whose config unties the two and whose ``lm_head.weight`` is the embedding:
the same function, and a head that every reload replaces. The weights id stays the original's.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

HEAD = "lm_head.weight"


def tied(model_dir: str | Path) -> bool:
    config = json.loads((Path(model_dir) / "config.json").read_text())
    text = config.get("text_config") or {}
    return bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


def servable(model_dir: str | Path, out: str | Path) -> Path:
    """``model_dir`` itself when its embeddings are untied, else its untied copy written to ``out``
    (replaced whole: a reader never sees half a checkpoint)."""
    model_dir, out = Path(model_dir).resolve(), Path(out).resolve()
    if not tied(model_dir):
        return model_dir
    from safetensors.torch import load_file, save_file

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights = (".safetensors", ".safetensors.index.json")
    for f in model_dir.iterdir():
        if f.is_file() and not f.name.endswith(weights) and f.name != "config.json":
            shutil.copy2(f, tmp / f.name)
    config = json.loads((model_dir / "config.json").read_text())
    config["tie_word_embeddings"] = False
    if isinstance(config.get("text_config"), dict):
        config["text_config"]["tie_word_embeddings"] = False
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    tensors: dict = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(f))
    embed = [k for k in tensors if k.endswith("embed_tokens.weight")]
    if len(embed) != 1:
        raise ValueError(f"{model_dir}: tied embeddings but {len(embed)} tensors named *embed_tokens.weight "
                         "(cannot write the untied copy vLLM reloads in place)")
    head = embed[0].replace("model.embed_tokens.weight", HEAD) if embed[0].startswith("model.") else HEAD
    tensors[head] = tensors[embed[0]].clone()
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
