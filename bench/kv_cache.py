"""Decoding with long contexts: the backend's KV-cache handling against the plain one.

Math episodes reach ~1000 tokens of context and their rows stop at different tokens. Three
variants of the same backend loop, model, requests and seeds, one after the other in this
process (so they share the machine's load):
  dynamic_eager   transformers' DynamicLayer (concatenates the whole cache at every token), and
                  every finished row removed from the cache at once (a full copy each time);
  prealloc_eager  the preallocated cache, rows still removed at once;
  prealloc_lazy   what the backend does: preallocated, rows removed once half the batch is done.
All three must produce the same tokens. Prints one JSON line: tok/s of each, speedups against
dynamic_eager.

    python bench/kv_cache.py                                   # SmolLM2, 32 x 400-token prompts, 200 new tokens
    python bench/kv_cache.py --prompts 8 --context 200 --new-tokens 16   # quick
"""
from __future__ import annotations

import argparse
import json
import random
import time

import torch
from transformers.cache_utils import DynamicLayer

import whale.rollout.backends.hf as hf
from whale.rollout.backends.base import GenRequest, Sampling

WORDS = "the model reads a program prints its output and writes the answer in a box".split()


def requests(tokenizer, n: int, context: int, new_tokens: int, seed: int) -> list[GenRequest]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ids = tokenizer.encode(" ".join(rng.choice(WORDS) for _ in range(context)))[:context]
        # rows stop at different tokens, as turns ended by stop strings do
        out.append(GenRequest(ids, rng.randint(new_tokens // 8, new_tokens), seed=seed + i, stop=[]))
    return out


def timed(backend, reqs, sampling) -> tuple[float, list[list[int]]]:
    start = time.perf_counter()
    results = backend.generate(reqs, sampling)
    return time.perf_counter() - start, [r.ids for r in results]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default="data/model")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--context", type=int, default=400)
    ap.add_argument("--new-tokens", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    backend = hf.TransformersBackend(args.model_dir, max_batch=args.prompts)
    reqs = requests(backend.tokenizer, args.prompts, args.context, args.new_tokens, args.seed)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=20)
    timed(backend, reqs[:2], sampling)  # warm-up: allocator and kernels
    eager = 1 - 1e-9  # compact as soon as any row is done
    variants = {"dynamic_eager": (lambda capacity: DynamicLayer(), eager),
                "prealloc_eager": (hf.PreallocatedLayer, eager),
                "prealloc_lazy": (hf.PreallocatedLayer, hf.COMPACT_AT)}
    layer, compact_at = hf.PreallocatedLayer, hf.COMPACT_AT
    seconds, tokens = {}, {}
    try:
        for name, (variant_layer, variant_compact_at) in variants.items():
            hf.PreallocatedLayer, hf.COMPACT_AT = variant_layer, variant_compact_at
            seconds[name], tokens[name] = timed(backend, reqs, sampling)
    finally:
        hf.PreallocatedLayer, hf.COMPACT_AT = layer, compact_at
    n = sum(len(t) for t in tokens["prealloc_lazy"])
    print(json.dumps({
        "prompts": args.prompts, "context": args.context, "max_new_tokens": args.new_tokens,
        "threads": torch.get_num_threads(), "same_tokens": len({json.dumps(t) for t in tokens.values()}) == 1,
        **{f"{k}_tok_s": round(n / v, 1) for k, v in seconds.items()},
        **{f"speedup_{k}": round(seconds["dynamic_eager"] / v, 2) for k, v in seconds.items() if k != "dynamic_eager"},
    }))


if __name__ == "__main__":
    main()
