"""Can the weight fingerprint tell fresh served weights from stale ones when the server computes in
bf16? Side by side on the same probes, after one RSFT step per learning rate:

- noise: a bf16 copy of the trainer's weights against the trainer's fp32 forward (a fresh server);
- stale: a bf16 copy of the weights *before* the step against the trainer after it;
- moved: the trainer after the step against itself before it.

Each as the largest and the mean absolute difference of one probe token's log-probability. A
statistic separates fresh from stale when its noise is well below its stale value; the ratio
stale / noise is printed per statistic.

``--server vllm`` asks the question the run asks: the project's vLLM server (``--dtype``) serves the
weights before the step, then reloads them after it, and its log-probabilities are compared with the
trainer's rounded to that dtype (what ``whale/rollout/fingerprint.py`` checks):

- kernel: the fresh server against the rounded trainer, before and after the step (the tolerance
  must exceed it);
- stale: the server before the step against the rounded trainer after it (what a server that kept
  the old weights shows; it must exceed the tolerance);
- moved_served / moved_rounded: how far the step moved the server's and the rounded trainer's
  numbers, and delta: the difference of the two moves (a check of the move, not of the level).

    python bench/fingerprint_noise.py --lrs 1e-6,1e-5      # SmolLM2 at data/model (CPU: minutes)
    python bench/fingerprint_noise.py --server vllm --dtype bfloat16 --lrs 1e-5
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def gaps(a: list[list[float]], b: list[list[float]]) -> dict:
    flat = [abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return {"max": max(flat), "mean": sum(flat) / len(flat)}


def training_rollouts(tokenizer, n: int) -> list:
    """``n`` short chat exchanges to take one step on (the content does not matter, the update does)."""
    from bench.engine import TOPICS
    from whale.rollout.chat import ChatFormat
    from whale.types import Rollout

    chat, out = ChatFormat(tokenizer), []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        prompt = chat.opening([{"role": "user", "content": f"Tell me about {topic}."}])
        answer = tokenizer.encode(f"{topic.capitalize()} are a classic subject; here is fact {i}.",
                                  add_special_tokens=False) + [tokenizer.eos_token_id]
        out.append(Rollout(run_id="fp", cycle=0, phase="weight", step=0, split="weight", example_id=f"e{i}",
                           sample_idx=0, harness_id="h", weights_id="w", seed=i, reward=1.0,
                           token_ids=prompt + answer, mask=[0] * len(prompt) + [1] * len(answer)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="data/model")
    ap.add_argument("--lrs", default="1e-6,1e-5")
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument("--server", choices=["vllm"], help="compare a real server's numbers (see above)")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"], help="the server's dtype")
    ap.add_argument("--vllm-python", default=".venv-vllm/bin/python")
    args = ap.parse_args()
    if args.server:
        served_report(args)
        return

    from whale.rollout.fingerprint import Rounded, local_logprobs, probe_ids
    from whale.train.rsft import RSFTConfig, RSFTTrainer

    rounded = Rounded("bfloat16")

    def served(model) -> list[list[float]]:  # what a bf16 server computes with these weights
        return local_logprobs(rounded(model), probes)

    report = {}
    for lr in [float(x) for x in args.lrs.split(",")]:
        trainer = RSFTTrainer(args.model, RSFTConfig(lr=lr, mini_batch=args.rollouts, micro_batch=4))
        probes = probe_ids(trainer.tokenizer)
        before, served_before = local_logprobs(trainer.model, probes), served(trainer.model)
        trainer.step(training_rollouts(trainer.tokenizer, args.rollouts))
        after, served_after = local_logprobs(trainer.model, probes), served(trainer.model)
        row = {"probe_tokens": sum(len(p) - 1 for p in probes), "noise_before": gaps(served_before, before),
               "noise": gaps(served_after, after), "stale": gaps(served_before, after), "moved": gaps(after, before)}
        row["stale_over_noise"] = {k: round(row["stale"][k] / row["noise"][k], 2) for k in ("max", "mean")}
        report[f"lr={lr:g}"] = row
        print(f"lr={lr:g}: " + json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def moves(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    return [[x - y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def served_and_rounded(backend, trainer, rounded, probes, out: str) -> tuple[list, list]:
    """Publish the trainer's weights to ``out``, have the server reload them; both sides' numbers."""
    from whale.rollout.fingerprint import local_logprobs

    trainer.model.save_pretrained(out)
    trainer.tokenizer.save_pretrained(out)
    backend.load(out)
    return backend.prompt_logprobs(probes), local_logprobs(rounded(trainer.model), probes)


def served_report(args) -> None:
    """One RSFT step per learning rate, the trainer's weights served by vLLM before and after it."""
    import tempfile

    from bench.vllm_engines import cpu_flags
    from whale.rollout.backends.vllm import VLLMBackend
    from whale.rollout.backends.vllm_server import ServerConfig
    from whale.rollout.fingerprint import Rounded, probe_ids
    from whale.train.rsft import RSFTConfig, RSFTTrainer

    report = {"cpu_flags": cpu_flags(), "server": "vllm", "dtype": args.dtype}
    with tempfile.TemporaryDirectory() as tmp:
        config = ServerConfig(python=args.vllm_python, dtype=args.dtype, kv_cache_gb=1, max_num_seqs=8,
                              max_model_len=1024, log_dir=f"{tmp}/log")
        backend = VLLMBackend(args.model, config)
        try:
            for lr in [float(x) for x in args.lrs.split(",")]:
                trainer = RSFTTrainer(args.model, RSFTConfig(lr=lr, mini_batch=args.rollouts, micro_batch=4))
                probes, rounded = probe_ids(trainer.tokenizer), Rounded(args.dtype)
                served_before, local_before = served_and_rounded(backend, trainer, rounded, probes, f"{tmp}/b{lr:g}")
                trainer.step(training_rollouts(trainer.tokenizer, args.rollouts))
                served_after, local_after = served_and_rounded(backend, trainer, rounded, probes, f"{tmp}/a{lr:g}")
                row = {"kernel_before": gaps(served_before, local_before), "kernel": gaps(served_after, local_after),
                       "stale": gaps(served_before, local_after), "moved_served": gaps(served_after, served_before),
                       "moved_rounded": gaps(local_after, local_before),
                       "delta": gaps(moves(served_after, served_before), moves(local_after, local_before))}
                report[f"lr={lr:g}"] = row
                print(f"lr={lr:g}: " + json.dumps(row), flush=True)
        finally:
            backend.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
