"""float32 against bfloat16, side by side in one run: generation speed, the RSFT step, the loss curve,
and how far bf16 log-probabilities sit from fp32 (what a bf16 server's fingerprint tolerance must allow).

    .venv/bin/python bench/numerics.py [--model data/model] [--rollouts 16] [--tokens 160] [--steps 2]

Each measurement runs in its own process (peak RSS per variant), one after another, so both dtypes
share the machine's load. Generation: ``bench/engine.py``'s batched path (``--prompts`` x
``--new-tokens``). Training: ``bench/sft.py`` (``--rollouts`` of about ``--tokens`` tokens, mini-batch
16, ``--steps`` steps on the same rollouts at lr 1e-5, so the loss curve shows whether bf16 autocast
learns the same). Prints one JSON object with the ratios.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DTYPES = ("float32", "bfloat16")


def child(argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, check=True, cwd=HERE.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def generation(model: str, dtype: str, prompts: int, new_tokens: int) -> dict:
    """Batched tokens/s of the transformers backend in ``dtype`` (bench/engine.py's measurement)."""
    import resource

    import torch

    sys.path.insert(0, str(HERE.parent))
    from bench.engine import batched
    from bench.engine import prompts as chat_prompts
    from whale.rollout.backends.base import GenRequest, Sampling
    from whale.rollout.backends.hf import TransformersBackend
    from whale.rollout.chat import ChatFormat

    backend = TransformersBackend(model, dtype=dtype, max_batch=prompts)
    requests = [GenRequest(ids, new_tokens, seed=i) for i, ids in enumerate(chat_prompts(ChatFormat(backend.tokenizer),
                                                                                         prompts))]
    backend.generate(requests[:1], Sampling(temperature=0.0))
    wall, cpu, n = batched(backend, requests, Sampling(1.0, 1.0, 20))
    return {"tok_per_s": round(n / wall, 2), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "tokens": n,
            "threads": torch.get_num_threads(),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def logprob_gap(model: str) -> dict:
    """The fingerprint's probe log-probabilities in fp32 and in bf16 (weights cast, as a bf16 server)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whale.rollout.fingerprint import distance, local_logprobs, probe_ids

    probes = probe_ids(AutoTokenizer.from_pretrained(model))
    fp32 = local_logprobs(AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32), probes)
    bf16 = local_logprobs(AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16), probes)
    flat = [abs(a - b) for s, t in zip(fp32, bf16, strict=True) for a, b in zip(s, t, strict=True)]
    return {"max_nats": round(distance(bf16, fp32), 4), "mean_nats": round(sum(flat) / len(flat), 4),
            "tokens": len(flat)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="data/model")
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--only", choices=["generation", "logprobs"], help=argparse.SUPPRESS)  # one child measurement
    ap.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only == "generation":
        print(json.dumps(generation(args.model, args.dtype, args.prompts, args.new_tokens)))
        return
    if args.only == "logprobs":
        print(json.dumps(logprob_gap(args.model)))
        return

    report = {"generation": {}, "sft": {}}
    me = [str(HERE / "numerics.py"), "--model", args.model]
    for dtype in DTYPES:
        report["generation"][dtype] = child(me + ["--only", "generation", "--dtype", dtype, "--prompts",
                                                  str(args.prompts), "--new-tokens", str(args.new_tokens)])
        print(f"generation {dtype}: {report['generation'][dtype]}", file=sys.stderr, flush=True)
    for dtype in DTYPES:
        report["sft"][dtype] = child([str(HERE / "sft.py"), "--model", args.model, "--dtype", dtype, "--rollouts",
                                      str(args.rollouts), "--tokens", str(args.tokens), "--steps", str(args.steps),
                                      "--mini-batch", "16", "--micro-batch", "4"])
        print(f"sft {dtype}: {report['sft'][dtype]}", file=sys.stderr, flush=True)
    report["logprobs_bf16_vs_fp32"] = child(me + ["--only", "logprobs"])
    g, s = report["generation"], report["sft"]
    report["bf16_over_fp32"] = {
        "generation_tok_per_s": round(g["bfloat16"]["tok_per_s"] / g["float32"]["tok_per_s"], 2),
        "sft_s_per_step": round(s["bfloat16"]["s_per_step"] / s["float32"]["s_per_step"], 2),
        "sft_peak_rss": round(s["bfloat16"]["peak_rss_gb"] / s["float32"]["peak_rss_gb"], 2),
        "loss_curve_max_gap": round(max(abs(a - b) for a, b in zip(s["bfloat16"]["losses"], s["float32"]["losses"],
                                                                     strict=True)), 4),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
