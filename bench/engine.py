"""Throughput of the batched engine path against a per-episode ``model.generate`` loop.

Both run the same model object on the same chat prompts with the same token limit and
sampling, one after the other in this process, so they share the machine's load; the ratio
is what batching across episodes buys. Beside them, the forward bound: the same shapes through
bare forward passes (prefill, then one token per row per step), the model compute the engine
cannot go below. ``--http`` adds the scale path: the same requests
through ``OpenAIBackend`` against a loopback ``whale serve``.

    python bench/engine.py                               # SmolLM2 at data/model, 32 x 64 tokens
    python bench/engine.py --prompts 8 --new-tokens 16   # quick
    python bench/engine.py --prompts 128 --no-per-episode --max-batch 32,64,128  # batch size sweep

``--max-batch`` also runs the batched path with the backend's ``max_batch`` at each value on the
same requests, alternating, so the batch sizes share the machine's load: on a CPU, decoding one
token per row reads every weight once per step, so larger batches may pay off until compute binds.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch

from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.chat import ChatFormat

TOPICS = ["rainbows", "prime numbers", "tides", "photosynthesis", "chess openings", "volcanoes",
          "the Roman calendar", "binary search", "compound interest", "bird migration", "glaciers"]


def prompts(chat: ChatFormat, n: int) -> list[list[int]]:
    """``n`` distinct chat prompts of varied length (deterministic)."""
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        detail = " Mention one surprising fact." * (i % 4)
        question = f"Q{i}: explain {topic} in {1 + i % 3} sentences.{detail}"
        out.append(chat.opening([{"role": "user", "content": question}]))
    return out


def timed(fn) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds of this process (all threads) and the result.

    On a shared machine wall time depends on the neighbours; CPU time mostly does not.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # the forward bound's last kernels may still be queued
    return time.perf_counter() - wall, time.process_time() - cpu, result


def batched(backend: TransformersBackend, requests: list[GenRequest], sampling: Sampling) -> tuple:
    wall, cpu, results = timed(lambda: backend.generate(requests, sampling))
    return wall, cpu, sum(len(r.ids) for r in results)


@torch.no_grad()
def per_episode(model, requests: list[GenRequest], sampling: Sampling, eos_id: int) -> tuple:
    """One ``model.generate`` call per episode: what an engine without cross-episode batching does."""
    def run() -> int:
        tokens = 0
        for req in requests:
            torch.manual_seed(req.seed)
            ids = torch.tensor([req.ids])
            kwargs = {"do_sample": False}
            if sampling.temperature > 0:
                kwargs = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p,
                          "top_k": sampling.top_k}  # 0 disables top-k here too
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=req.max_new_tokens,
                                 eos_token_id=eos_id, pad_token_id=eos_id, **kwargs)
            tokens += out.shape[1] - ids.shape[1]
        return tokens

    return timed(run)


@torch.no_grad()
def forward_bound(backend: TransformersBackend, requests: list[GenRequest]) -> tuple:
    """The model compute alone, on the same shapes: the batch's padded prefill, then one
    single-token forward pass per new token for every row over a preallocated cache (greedy
    feedback, no sampling, stop checks, row compaction or bookkeeping). The engine cannot beat it."""
    from transformers.cache_utils import Cache

    from whale.rollout.backends.hf import PreallocatedLayer

    model = backend.model

    def run() -> int:
        n, width = len(requests), max(len(r.ids) for r in requests)
        new = max(r.max_new_tokens for r in requests)
        ids = torch.full((n, width), backend.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(requests):
            ids[i, width - len(r.ids):] = torch.tensor(r.ids)
            attn[i, width - len(r.ids):] = 1
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        ids, attn, pos = ids.to(model.device), attn.to(model.device), pos.to(model.device)
        cache = Cache(layers=[PreallocatedLayer(width + new) for _ in range(model.config.num_hidden_layers)])
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, cache=cache, use_cache=True,
                    logits_to_keep=1)
        tok, last = out.logits[:, -1].argmax(-1, keepdim=True), pos[:, -1:]
        for _ in range(new):
            attn, last = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1), last + 1
            out = model(input_ids=tok, attention_mask=attn, position_ids=last, cache=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
        return n * new

    return timed(run)


def over_http(model_dir: str, requests: list[GenRequest], sampling: Sampling, dtype: str) -> tuple:
    from whale.rollout.backends.openai import OpenAIBackend
    from whale.rollout.serve import make_server

    server = make_server(model_dir, dtype=dtype, max_batch=len(requests)).start()
    backend = OpenAIBackend(server.base_url, model_dir, max_batch=len(requests))
    try:
        backend.generate(requests[:1], Sampling(temperature=0.0))  # warm the connection and the model
        wall, cpu, results = timed(lambda: backend.generate(requests, sampling))
        return wall, cpu, sum(len(r.ids) for r in results)
    finally:
        backend.close()
        server.stop()


def sweep(backend: TransformersBackend, requests: list[GenRequest], sampling: Sampling, sizes: list[int]) -> dict:
    """tok/s of the batched path at each ``max_batch``, two passes in alternation (the best counts)."""
    runs: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(2):
        for size in sizes:
            backend.max_batch = size
            wall, _, n = batched(backend, requests, sampling)
            runs[size].append(round(n / wall, 1))
    backend.max_batch = len(requests)
    out = {str(size): {"tok_per_s": tps, "best_over_first": round(max(tps) / max(runs[sizes[0]]), 2)}
           for size, tps in runs.items()}
    for size, r in out.items():
        print(f"max_batch {size:>4s}: {r['tok_per_s']} tok/s, {r['best_over_first']}x max_batch {sizes[0]}",
              flush=True)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default="data/model")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch's default)")
    ap.add_argument("--http", action="store_true", help="also measure OpenAIBackend against a loopback whale serve")
    ap.add_argument("--no-per-episode", action="store_true",
                    help="skip the per-episode generate loop (hours for hundreds of prompts on a GPU)")
    ap.add_argument("--max-batch", default="",
                    help="comma-separated max_batch values: also time the batched path at each (two passes)")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    backend = TransformersBackend(args.model_dir, dtype=args.dtype, max_batch=args.prompts)
    sampling = Sampling(args.temperature, args.top_p, args.top_k)
    requests = [GenRequest(ids, args.new_tokens, seed=args.seed + i)
                for i, ids in enumerate(prompts(ChatFormat(backend.tokenizer), args.prompts))]
    print(f"model {args.model_dir} ({args.dtype}), {args.prompts} prompts x {args.new_tokens} new tokens, "
          f"{sampling}, torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    backend.generate(requests[:1], Sampling(temperature=0.0))  # first-call overheads stay out of both timings

    paths = {"batched": lambda: batched(backend, requests, sampling),
             "forward_bound": lambda: forward_bound(backend, requests)}
    if args.http:
        paths["http"] = lambda: over_http(args.model_dir, requests, sampling, args.dtype)
    if not args.no_per_episode:
        paths["per_episode"] = lambda: per_episode(backend.model, requests, sampling, backend.eos_id)
    report = {}
    for name, measure in paths.items():  # printed as they come: the slow path takes minutes
        wall, cpu, n = measure()
        r = report[name] = {"tokens": n, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                            "tok_per_s": round(n / wall, 1), "tok_per_cpu_s": round(n / cpu, 1)}
        print(f"{name:12s} {n:6d} tokens  wall {wall:8.2f} s {r['tok_per_s']:7.1f} tok/s"
              f"  cpu {cpu:8.2f} s {r['tok_per_cpu_s']:7.1f} tok/cpu-s", flush=True)
    if args.max_batch:
        report["max_batch"] = sweep(backend, requests, sampling, [int(v) for v in args.max_batch.split(",")])
    bound = report["forward_bound"]
    report["bound_over_engine"] = round(bound["tok_per_s"] / report["batched"]["tok_per_s"], 2)
    print(f"forward bound / engine: {report['bound_over_engine']}x tok/s (the engine's distance from "
          "the model's own compute on these shapes; target <= 2)")
    if "per_episode" in report:
        b, p = report["batched"], report["per_episode"]
        report["speedup_wall"] = round(b["tok_per_s"] / p["tok_per_s"], 2)
        report["speedup_cpu"] = round(b["tok_per_cpu_s"] / p["tok_per_cpu_s"], 2)
        print(f"batched / per-episode: {report['speedup_wall']}x tok/s, {report['speedup_cpu']}x tok/cpu-s "
              f"(load average now {os.getloadavg()[0]:.1f})")
    if args.json:
        tmp = f"{args.json}.tmp"
        with open(tmp, "w") as fh:
            json.dump({"args": vars(args), **report}, fh, indent=2)
        os.replace(tmp, args.json)
    return report


if __name__ == "__main__":
    main()
