"""RSFT checkpoints: HF safetensors weights + tokenizer + the trainer state, written atomically.

A checkpoint directory holds ``model.safetensors``, ``config.json``, the tokenizer files,
``trainer_state.pt`` (optimizer, scheduler, global step, RNG states: python, numpy, torch, CUDA,
and the data-order generator) and ``whale_checkpoint.json`` (step, weights id, config). It is
written under ``<out_dir>.tmp`` and renamed into place, so a directory named ``step-…`` is always
complete; a crash leaves at most a ``.tmp`` directory that nothing reads.

A file byte-identical to the same file of an earlier checkpoint with the same weights id (a
weight phase whose steps were all skipped) is a hard link to it, not a second copy: checkpoint
files are never changed in place, so removing either directory leaves the other whole.
"""
from __future__ import annotations

import filecmp
import json
import os
import random
import re
import shutil
from pathlib import Path

from whale.model import weights_id

STATE_FILE = "trainer_state.pt"
META_FILE = "whale_checkpoint.json"
STEP_DIR = re.compile(r"^step-(\d{6,})$")


def checkpoint_dir(root: str | Path, step: int) -> Path:
    """Where the checkpoint after ``step`` optimizer steps lives: ``root/step-000012``."""
    return Path(root) / f"step-{step:06d}"


def checkpoints(root: str | Path) -> list[Path]:
    """The complete checkpoints under ``root``, latest step first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if (m := STEP_DIR.match(p.name)) and (p / META_FILE).exists()]
    return [p for _, p in sorted(found, reverse=True)]


def latest_checkpoint(root: str | Path) -> Path | None:
    """The complete checkpoint with the highest step under ``root``, or None."""
    found = checkpoints(root)
    return found[0] if found else None


def checkpoint_weights_id(ckpt_dir: str | Path) -> str:
    """The weights id a complete checkpoint recorded when it was written (no hashing)."""
    return json.loads((Path(ckpt_dir) / META_FILE).read_text())["weights_id"]


def save_checkpoint(trainer, out_dir: str | Path) -> str:
    """Write ``trainer``'s weights and state to ``out_dir`` atomically; return the weights id."""
    import torch

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.model.save_pretrained(tmp)
    trainer.tokenizer.save_pretrained(tmp)
    torch.save(_trainer_state(trainer), tmp / STATE_FILE)
    wid = weights_id(tmp)
    twin = next((c for c in checkpoints(out_dir.parent) if checkpoint_weights_id(c) == wid), None)
    if twin is not None:
        _link_identical(tmp, twin)
    meta = {**trainer.describe(), "weights_id": wid}
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    _fsync_tree(tmp)
    if out_dir.exists():  # a rewrite of the same step: move the old one aside first, then drop it
        old = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old)
    else:
        tmp.rename(out_dir)
    return wid


def load_trainer_state(trainer, ckpt_dir: str | Path, weights: bool = True) -> None:
    """Restore a trainer from ``ckpt_dir``: optionally the weights, then optimizer, scheduler, step, RNGs."""
    import torch

    ckpt_dir = Path(ckpt_dir)
    if not (ckpt_dir / META_FILE).exists():
        raise FileNotFoundError(f"{ckpt_dir} is not a complete checkpoint (no {META_FILE})")
    if weights:
        _load_weights(trainer.model, ckpt_dir)
    state = torch.load(ckpt_dir / STATE_FILE, map_location="cpu", weights_only=True)
    trainer.trainer.optimizer.load_state_dict(state["optimizer"])  # moves moments beside their parameters
    trainer.trainer.lr_scheduler.load_state_dict(state["scheduler"])
    trainer.trainer.state.global_step = int(state["global_step"])
    _set_rng_states(trainer, state["rng"])


def _trainer_state(trainer) -> dict:
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    rng = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "data_order": trainer.generator.get_state(),
    }
    return {"optimizer": trainer.trainer.optimizer.state_dict(),
            "scheduler": trainer.trainer.lr_scheduler.state_dict(),
            "global_step": trainer.global_step, "rng": rng}


def _set_rng_states(trainer, rng: dict) -> None:
    import numpy as np
    import torch

    version, internal, gauss = rng["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    trainer.generator.set_state(rng["data_order"])


def _load_weights(model, ckpt_dir: Path) -> None:
    """Load ``model.safetensors`` in place; only weights tied to a loaded one may be absent from the file."""
    from safetensors.torch import load_file

    loaded = {}
    for f in sorted(ckpt_dir.glob("*.safetensors")):
        loaded.update(load_file(f))
    result = model.load_state_dict(loaded, strict=False)
    tensors = model.state_dict()
    loaded_ptrs = {tensors[k].data_ptr() for k in loaded if k in tensors}
    untied = [k for k in result.missing_keys if tensors[k].data_ptr() not in loaded_ptrs]
    if untied or result.unexpected_keys:
        raise ValueError(f"{ckpt_dir}: weights do not match the model (missing {untied}, "
                         f"unexpected {result.unexpected_keys})")


def _link_identical(tmp: Path, twin: Path) -> None:
    """Replace each file of ``tmp`` that ``twin`` holds byte for byte by a hard link to twin's."""
    for f in tmp.iterdir():
        other = twin / f.name
        if f.is_file() and other.is_file() and filecmp.cmp(f, other, shallow=False):
            link = f.with_name(f.name + ".link")
            try:
                os.link(other, link)
            except OSError:  # another file system, or links not allowed: keep the copy
                continue
            os.replace(link, f)


def _fsync_tree(path: Path) -> None:
    """Flush the files of ``path`` to disk before the rename makes them look complete."""
    for f in path.iterdir():
        if f.is_file():
            with f.open("rb") as fh:
                os.fsync(fh.fileno())
