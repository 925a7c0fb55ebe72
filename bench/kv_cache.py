"""Decoding with long contexts: the backend's preallocated KV cache against transformers' DynamicLayer.

Math episodes reach ~1000 tokens of context. DynamicLayer concatenates the whole cache at every
token; `PreallocatedLayer` writes into a buffer. Both runs use the same backend loop, model,
requests and seeds, one after the other in this process (so they share the machine's load), and
must produce the same tokens. Prints one JSON line with tok/s of each and the ratio.

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

import whale.backends.hf as hf
from whale.backends.base import GenRequest, Sampling

WORDS = "the model reads a program prints its output and writes the answer in a box".split()


def requests(tokenizer, n: int, context: int, new_tokens: int, seed: int) -> list[GenRequest]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ids = tokenizer.encode(" ".join(rng.choice(WORDS) for _ in range(context)))[:context]
        out.append(GenRequest(ids, new_tokens, seed=seed + i, stop=[]))
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
    prealloc_s, prealloc = timed(backend, reqs, sampling)
    original = hf.PreallocatedLayer
    hf.PreallocatedLayer = lambda capacity: DynamicLayer()  # transformers' concatenating layer
    try:
        dynamic_s, dynamic = timed(backend, reqs, sampling)
    finally:
        hf.PreallocatedLayer = original
    tokens = sum(len(t) for t in prealloc)
    print(json.dumps({
        "prompts": args.prompts, "context": args.context, "new_tokens": args.new_tokens,
        "threads": torch.get_num_threads(), "same_tokens": prealloc == dynamic,
        "preallocated_tok_s": round(tokens / prealloc_s, 1), "dynamic_tok_s": round(tokens / dynamic_s, 1),
        "speedup": round(dynamic_s / prealloc_s, 2),
    }))


if __name__ == "__main__":
    main()
