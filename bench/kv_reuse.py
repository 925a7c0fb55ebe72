"""Cross-turn KV reuse: multi-turn episodes with and without keeping each episode's cache.

Math-like episodes through the real engine and the transformers backend: a long first prompt
(a problem and instructions), then each turn appends a tool-output-like observation and the
model writes up to ``--new-tokens`` tokens, for ``--turns`` turns. Each variant runs in its own
process (so its peak RSS is its own), alternating A B A B under the same load. The tokens should
be the same; ``rollouts_differing`` counts those that are not (batch layouts differ between the
variants, and a near tie of two logits can flip a sampled token: see the README). Prints one JSON
line: rollouts/s and peak RSS of each, and the ratios; the seconds each spent in prefill forwards
and in decoding steps, and the speedup that reuse could at most give (the re-prefill run's wall
time over that time less its prefill).

    python bench/kv_reuse.py                          # SmolLM2, 32 episodes x 4 turns
    python bench/kv_reuse.py --episodes 8 --repeats 1 # quick
    python bench/kv_reuse.py --episodes 128 --max-batch 32 --budget-mb 256  # more episodes than the budget holds
"""
from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HARNESS = '''
from harnesses.contract import BaseHarness, Finish, Prompt

OBSERVATION = "Tool output:\\n" + "\\n".join(f"line {i}: value {i * 37 % 101} (checked)" for i in range(12))


class Harness(BaseHarness):
    max_turns = TURNS
    token_budget = 4096

    def start(self, observation):
        self.turn = 0
        task = observation["question"]
        return Prompt(messages=[{"role": "system", "content": "Solve the problem. Think step by step, "
                                 "run code when it helps, and end with the answer in \\\\boxed{}. " * 6},
                                {"role": "user", "content": task}], max_new_tokens=NEW)

    def act(self, completion):
        self.turn += 1
        if self.turn >= TURNS:
            return Finish()
        return Prompt(messages=[{"role": "user", "content": OBSERVATION}], max_new_tokens=NEW)
'''


def variant(args) -> None:
    """One measurement in this process: print rollouts/s, peak RSS and a digest of the tokens."""
    from domains import get_domain
    from whale.rollout.backends.base import Sampling
    from whale.rollout.backends.hf import TransformersBackend
    from whale.rollout.engine import Engine

    domain = get_domain("math_reasoning", str(ROOT / "data"))
    test = domain.examples("test")
    k = -(-args.episodes // len(test))  # more episodes than examples: k samples of each, not copies
    examples = test[:-(-args.episodes // k)]
    backend = TransformersBackend(args.model_dir, max_batch=args.max_batch or args.episodes,
                                  kv_reuse_mb=args.kv_reuse_mb)
    engine = Engine(backend, domain, Sampling(temperature=1.0, top_p=1.0, top_k=20))
    source = HARNESS.replace("TURNS", str(args.turns)).replace("NEW", str(args.new_tokens))
    t0 = time.perf_counter()
    rollouts = engine.run(source, examples, k, seed=0, progress=False)
    wall = time.perf_counter() - t0
    digests = [hashlib.sha256(json.dumps(r.token_ids).encode()).hexdigest()[:12] for r in rollouts]
    print(json.dumps({"wall_s": wall, "rollouts_per_s": len(rollouts) / wall, "digests": digests,
                      "turns": sum(r.turns for r in rollouts) / len(rollouts),
                      "context": max(len(r.token_ids) for r in rollouts),
                      "reused_tokens": backend.prefix.reused_tokens, "refused": backend.prefix.refused,
                      "prefill_s": backend.timings.prefill_s, "decode_s": backend.timings.decode_s,
                      "prefill_positions": backend.timings.prefill_positions,
                      "decode_steps": backend.timings.decode_steps,
                      "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=str(ROOT / "data" / "model"))
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=0, help="rows per generation batch (0: all episodes at once)")
    ap.add_argument("--budget-mb", type=float, default=1024, help="the reuse variant's KV budget")
    ap.add_argument("--kv-reuse-mb", type=float, default=None, help=argparse.SUPPRESS)  # one variant
    args = ap.parse_args()
    if args.kv_reuse_mb is not None:
        return variant(args)
    common = ["--model-dir", args.model_dir, "--episodes", str(args.episodes), "--turns", str(args.turns),
              "--new-tokens", str(args.new_tokens), "--max-batch", str(args.max_batch)]
    runs: dict[str, list[dict]] = {"reprefill": [], "reuse": []}
    for _ in range(args.repeats):
        for name, mb in (("reprefill", 0), ("reuse", args.budget_mb)):
            out = subprocess.run([sys.executable, __file__, *common, "--kv-reuse-mb", str(mb)], check=True,
                                 capture_output=True, text=True).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    first = runs["reprefill"][0]["digests"]
    differing = [sum(a != b for a, b in zip(first, r["digests"], strict=True)) for rs in runs.values() for r in rs]
    best = {name: max(rs, key=lambda r: r["rollouts_per_s"]) for name, rs in runs.items()}
    print(json.dumps({
        "episodes": args.episodes, "turns": best["reuse"]["turns"], "max_context": best["reuse"]["context"],
        "reprefill_rollouts_per_s": round(best["reprefill"]["rollouts_per_s"], 3),
        "reuse_rollouts_per_s": round(best["reuse"]["rollouts_per_s"], 3),
        "speedup": round(best["reuse"]["rollouts_per_s"] / best["reprefill"]["rollouts_per_s"], 2),
        "reprefill_peak_rss_gb": round(max(r["peak_rss_gb"] for r in runs["reprefill"]), 2),
        "reuse_peak_rss_gb": round(max(r["peak_rss_gb"] for r in runs["reuse"]), 2),
        "reused_tokens": best["reuse"]["reused_tokens"], "refused_entries": best["reuse"]["refused"],
        **{f"{name}_{part}": round(best[name][part], 1) for name in best for part in ("prefill_s", "decode_s")},
        **{f"{name}_{part}": best[name][part] for name in best for part in ("prefill_positions", "decode_steps")},
        # the most any prefill saving could give: the re-prefill run with its prefill free
        "bound_if_prefill_free": round(best["reprefill"]["wall_s"] / (best["reprefill"]["wall_s"]
                                                                     - best["reprefill"]["prefill_s"]), 2),
        "same_tokens": not any(differing),
        # rollouts whose tokens differ from the first re-prefill run's, the worst run of either variant
        "rollouts_differing": max(differing),
    }))


if __name__ == "__main__":
    main()
