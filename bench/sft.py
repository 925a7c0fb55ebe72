"""Seconds per RSFT step and peak RSS of the trainer on the real model.

    .venv/bin/python bench/sft.py [--model data/model] [--rollouts 8] [--tokens 260] [--steps 3]

With ``--compare-trl`` a second trainer with TRL's own loss (its fused LM head) steps on the same
rollouts, alternating with the first, and the ratio is printed. ``--compare-compile`` does the same
with a trainer whose model runs through ``torch.compile`` (dynamic shapes); its first step carries
the compilation, printed as ``compile_s``. ``--floor`` also times, in the same run, the step's
linear-layer matrix multiplies alone (``floor_s``): every ``nn.Linear`` of the model on the padded
micro-batches, forward and both backward products, plus the LM head on the target rows. No
trainer can step faster on this machine without fewer FLOPs, so ``s_per_step / floor_s`` says how
much any schedule, fusion or kernel could still win.

Builds ``--rollouts`` two-turn ChatML tool episodes of about ``--tokens`` tokens each (prompt and
observation masked out, both assistant turns trained), then times ``RSFTTrainer.step`` on them.
The first step carries one-off costs (allocator, kernels), so the mean excludes it when there are
more. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import time
from collections import Counter
from pathlib import Path

WORDS = ("the model reads a passage and answers with a short span the verifier checks against gold "
         "tools return observations that the harness renders into the next user message").split()


def filler(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def build_rollouts(tokenizer, n: int, tokens: int, seed: int, spread: float = 0.0) -> list:
    """``n`` rollouts of about ``tokens`` tokens: 40% prompt, 30% call, 10% observation, 20% answer.
    With ``spread`` each rollout's length is drawn from ``tokens * (1 ± spread)``."""
    from whale.types import Rollout

    rng = random.Random(seed)
    out, mean = [], tokens
    for i in range(n):
        tokens = max(100, round(mean * (1 + spread * rng.uniform(-1, 1))))
        segments = [
            (f"<|im_start|>system\n{filler(rng, 20)}<|im_end|>\n<|im_start|>user\n{filler(rng, tokens * 4 // 10 - 40)}"
             "<|im_end|>\n<|im_start|>assistant\n", 0),
            (f"<search>{filler(rng, tokens * 3 // 10 - 10)}</search><|im_end|>", 1),
            (f"\n<|im_start|>user\n<tool_response>{filler(rng, tokens // 10 - 14)}</tool_response><|im_end|>\n"
             "<|im_start|>assistant\n", 0),
            (f"<answer>{filler(rng, tokens * 2 // 10 - 6)}</answer><|im_end|>", 1),
        ]
        ids, mask = [], []
        for text, bit in segments:
            piece = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids, mask = ids + piece, mask + [bit] * len(piece)
        out.append(Rollout(run_id="bench", cycle=0, phase="weight", step=0, split="weight", example_id=f"b{i}",
                           sample_idx=0, harness_id="bench", weights_id="bench", seed=seed, reward=1.0,
                           token_ids=ids, mask=mask))
    return out


def micro_batches(rollouts, order: list[int], mini: int, micro: int, by_length: bool) -> list[list[int]]:
    """The rollout lengths of each micro-batch, cut from ``order`` one mini-batch at a time."""
    out = []
    for start in range(0, len(order), mini):
        lengths = [len(rollouts[i].token_ids) for i in order[start:start + mini]]
        lengths = sorted(lengths) if by_length else lengths
        out += [lengths[m:m + micro] for m in range(0, len(lengths), micro)]
    return out


def padding(rollouts, order: list[int], mini: int, micro: int, by_length: bool) -> float:
    parts = micro_batches(rollouts, order, mini, micro, by_length)
    real, padded = sum(map(sum, parts)), sum(max(part) * len(part) for part in parts)
    return round(padded / real - 1, 3)


def linear_floor(model, micro_tokens: list[int], target_rows: int, repeats: int = 3) -> float:
    """Seconds of the matrix multiplies of one step's linear layers alone: for each micro-batch of
    ``micro_tokens`` padded positions, every ``nn.Linear`` but the head (forward ``x W``, backward
    ``g W^T`` and ``x^T g``), and the tied head on ``target_rows`` rows; the fastest of ``repeats``."""
    import torch

    shapes = Counter((m.in_features, m.out_features) for name, m in model.named_modules()
                     if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head"))
    head = model.get_output_embeddings().weight.shape  # [vocab, hidden]
    work = [(t, n_in, n_out, count) for t in micro_tokens for (n_in, n_out), count in shapes.items()]
    work.append((target_rows, head[1], head[0], 1))

    def once() -> float:
        total = 0.0
        for t, n_in, n_out, count in work:
            x, w, g = torch.randn(t, n_in), torch.randn(n_in, n_out), torch.randn(t, n_out)
            start = time.perf_counter()
            for _ in range(count):
                x @ w, g @ w.T, x.T @ g
            total += time.perf_counter() - start
        return total

    with torch.no_grad():
        return min(once() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="data/model")
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=260)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--mini-batch", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--spread", type=float, default=0.0, help="rollout lengths vary by this share")
    parser.add_argument("--compare-trl", action="store_true",
                        help="also time TRL's own loss on a second trainer, alternating steps (peak RSS is then both)")
    parser.add_argument("--compare-compile", action="store_true",
                        help="also time a trainer whose model is torch.compile'd, alternating steps")
    parser.add_argument("--floor", action="store_true",
                        help="also time the step's linear-layer matrix multiplies alone (the FLOP floor)")
    args = parser.parse_args()

    from trl import SFTTrainer

    from whale.train.rsft import RSFTConfig, RSFTTrainer

    if not (Path(args.model) / "model.safetensors").exists():
        raise SystemExit(f"{args.model}: no model.safetensors (run `whale model export` first)")
    config = RSFTConfig(lr=1e-5, mini_batch=args.mini_batch, micro_batch=args.micro_batch, dtype=args.dtype,
                        activation_checkpointing=args.activation_checkpointing)
    t0 = time.perf_counter()
    trainers = {"target_rows": RSFTTrainer(args.model, config)}
    init_s = time.perf_counter() - t0
    if args.compare_trl:
        # TRL's own loss (fused LM head over every position where Triton is absent), same weights and data
        trl = RSFTTrainer(args.model, config)
        trl.trainer.compute_loss = SFTTrainer.compute_loss.__get__(trl.trainer)
        trainers["trl_fused"] = trl
    if args.compare_compile:
        import torch

        compiled = RSFTTrainer(args.model, config)
        compiled.trainer.model_wrapped = torch.compile(compiled.trainer.model_wrapped, dynamic=True)
        trainers["compiled"] = compiled
    rollouts = build_rollouts(trainers["target_rows"].tokenizer, args.rollouts, args.tokens, seed=0,
                              spread=args.spread)
    steps = {name: [] for name in trainers}
    cpu = {name: [] for name in trainers}
    for _ in range(args.steps):  # A B A B: both variants under the same load
        for name, trainer in trainers.items():
            c0 = time.process_time()  # CPU seconds of all threads: less sensitive than wall time to other load
            steps[name].append(trainer.step(rollouts))
            cpu[name].append(time.process_time() - c0)
    variants = {}
    for name in trainers:
        times = [s.wall_s for s in steps[name]]
        timed = times[1:] or times
        variants[name] = {"step_s": [round(t, 2) for t in times], "s_per_step": round(sum(timed) / len(timed), 2),
                          "cpu_s": [round(c, 2) for c in cpu[name]],
                          "losses": [round(s.loss, 4) for s in steps[name]]}
    first = steps["target_rows"][0]
    out = {
        "model": args.model, "dtype": args.dtype, "rollouts": args.rollouts,
        "mean_tokens_per_rollout": sum(len(r.token_ids) for r in rollouts) / len(rollouts),
        "trained_tokens_per_step": first.tokens, "mini_batch": args.mini_batch,
        "micro_batch": args.micro_batch, "activation_checkpointing": args.activation_checkpointing,
        "optimizer_steps_per_step": first.optimizer_steps,
        # padded positions per real one when micro-batches are cut from the shuffled order, and from
        # it sorted by length (what the trainer does)
        "padding_shuffled": padding(rollouts, first.order, args.mini_batch, args.micro_batch, False),
        "padding_sorted": padding(rollouts, first.order, args.mini_batch, args.micro_batch, True),
        "init_s": round(init_s, 2), **variants["target_rows"],
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "threads": __import__("torch").get_num_threads(), "load_avg_1m": round(os.getloadavg()[0], 1),
    }
    if args.compare_trl:
        out["trl_fused"] = variants["trl_fused"]
        out["speedup_vs_trl_fused"] = round(variants["trl_fused"]["s_per_step"] / out["s_per_step"], 2)
        out["cpu_ratio_vs_trl_fused"] = round(sum(cpu["trl_fused"][1:] or cpu["trl_fused"])
                                              / sum(cpu["target_rows"][1:] or cpu["target_rows"]), 2)
    if args.compare_compile:
        out["compiled"] = variants["compiled"]
        out["compile_s"] = round(variants["compiled"]["step_s"][0] - variants["target_rows"]["step_s"][0], 1)
        out["speedup_compiled"] = round(out["s_per_step"] / variants["compiled"]["s_per_step"], 2)
    if args.floor:
        # padded positions of each micro-batch, cut as the trainer cuts them (sorted by length)
        micro = [max(part) * len(part) for part in micro_batches(rollouts, first.order, args.mini_batch,
                                                                 args.micro_batch, True)]
        model = trainers["target_rows"].trainer.model
        out["floor_s"] = round(linear_floor(model, micro, first.tokens), 2)
        out["step_over_floor"] = round(out["s_per_step"] / out["floor_s"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
