"""The transformers engine against vLLM (fp32, bf16, fp32 without prefix caching, and turn by turn
instead of per episode) on each domain's test evaluation: the h0 (``--profile handwritten``: the
hand-written ones) under the base weights, at the domain's default ``eval.k``, with the run's
sampling and seeds, side by side in one invocation.

Each (domain, engine) pair runs in a child process of its own, one after another, so its peak RSS
is its own: the child's (``ru_maxrss``) and, for vLLM, the peak resident set of every process of the
server's group (``VmHWM``, summed: an upper bound of their joint peak). A vLLM server's start is
timed apart from its rollouts. Scores are mean@k per test example with a bootstrap interval; the
vLLM rows also give their paired difference from the transformers row (same examples, same seeds,
different sampler and kernels: a difference within noise is what "the same scores" means here).

    .venv/bin/python bench/vllm_engines.py                                  # all domains and engines
    .venv/bin/python bench/vllm_engines.py --domains chess_puzzles --examples 16 --engines transformers,vllm-fp32
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENGINES = {
    "transformers": {"kind": "transformers"},
    "vllm-fp32": {"kind": "vllm", "vllm": {"dtype": "float32"}},
    "vllm-bf16": {"kind": "vllm", "vllm": {"dtype": "bfloat16"}},
    "vllm-fp32-nocache": {"kind": "vllm", "vllm": {"dtype": "float32", "prefix_caching": False}},
    # turn by turn (every episode waits for the turn's slowest) instead of each episode on its own
    "vllm-fp32-turns": {"kind": "vllm", "per_episode": False, "vllm": {"dtype": "float32"}},
    "vllm-bf16-turns": {"kind": "vllm", "per_episode": False, "vllm": {"dtype": "bfloat16"}},
    # the null policy (no model compute): what the harness hooks, the jail and the tools cost alone,
    # on other episodes (random tokens or choices), so a bound for orientation, not a paired row
    "null": {"kind": "transformers"},
}
DOMAINS = ("chess_puzzles", "search_qa", "math_reasoning")


def cpu_flags() -> str:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    wanted = [f for f in sorted(flags) if f.startswith(("avx512", "amx")) or f in ("avx2", "fma")]
    return " ".join(wanted) or "none of avx2/avx512/amx"


def emit(row: dict, rows: list[dict], json_path: Path | None) -> None:
    """Print a bench row as it comes and rewrite the JSON file with every row so far, so that an
    interrupted bench keeps what it measured."""
    rows.append(row)
    print(json.dumps(row), flush=True)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(rows, indent=1))


def group_peak_rss_mb(pgid: int) -> float:
    """Sum of VmHWM over the live processes of a process group."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def one(domain_name: str, engine: str, examples: int, k: int | None, profile: str | None = None) -> dict:
    """Run in the child: one engine's test evaluation of one domain."""
    from whale.run.context import domain_for, h0_source, make_engine, model_dir
    from whale.run.settings import load_settings
    from whale.types import RolloutContext

    settings = load_settings(ROOT / "params.yaml", profile=profile, domain=domain_name,
                             overrides={"backend": ENGINES[engine]})
    domain = domain_for(settings, domain_name, str(ROOT / "data"))
    tests = domain.examples("test")[:examples] if examples else domain.examples("test")
    k = k or settings.eval.k
    t0 = time.perf_counter()
    if engine == "null":
        from transformers import AutoTokenizer

        from whale.rollout.backends.base import Sampling
        from whale.rollout.backends.null import NullBackend
        from whale.rollout.engine import Engine
        from whale.run.context import sandbox_limits

        engine_ = Engine(NullBackend(AutoTokenizer.from_pretrained(model_dir(settings))), domain,
                         Sampling(**settings.sampling.model_dump()), sandbox_limits(settings))
    else:
        engine_ = make_engine(settings, domain, model_dir(settings), log_dir=f"/tmp/whale-bench-vllm/{engine}")
    start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rollouts = engine_.run(h0_source(settings, domain_name), tests, k, settings.seed,
                           RolloutContext("bench", 0, "eval", 0), progress=False)
    wall = time.perf_counter() - t0
    server = getattr(engine_.backend, "server", None)
    server_rss = group_peak_rss_mb(server.proc.pid) if server is not None and server.alive() else 0.0
    if hasattr(engine_.backend, "close"):
        engine_.backend.close()
    by_example: dict[str, list[float]] = {}
    for r in rollouts:
        by_example.setdefault(r.example_id, []).append(r.reward)
    ids = [e.id for e in tests]
    return {"domain": domain_name, "engine": engine, "examples": len(tests), "k": k, "rollouts": len(rollouts),
            "errors": sum(r.error is not None for r in rollouts), "start_s": round(start_s, 1),
            "wall_s": round(wall, 1), "rollouts_per_s": round(len(rollouts) / wall, 3),
            "tokens_in": sum(r.tokens_in for r in rollouts), "tokens_out": sum(r.tokens_out for r in rollouts),
            "tokens_per_s": round(sum(r.tokens_out for r in rollouts) / wall, 1),
            "server_peak_rss_mb": round(server_rss),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "scores": [sum(by_example[i]) / len(by_example[i]) for i in ids]}


def child(domain: str, engine: str, args) -> dict:
    cmd = [sys.executable, __file__, "--one", domain, engine, "--examples", str(args.examples)]
    if args.k:
        cmd += ["--k", str(args.k)]
    if args.profile:
        cmd += ["--profile", args.profile]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        out, _ = proc.communicate(timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()  # its vLLM server dies with it (PR_SET_PDEATHSIG)
        proc.communicate()
        return {"domain": domain, "engine": engine, "error": f"did not finish in {args.timeout_s:g} s"}
    if proc.returncode != 0:
        return {"domain": domain, "engine": engine, "error": f"exit status {proc.returncode}"}
    return json.loads(out.decode().strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    from whale.stats import difference, estimate

    ref = {r["domain"]: r for r in results if r.get("engine") == "transformers" and "scores" in r}
    lines = ["| domain | engine | rollouts | rollouts/s | x | tokens/s | start s | peak RSS MB (run + server) "
             "| test mean@k [95 % CI] | - transformers |", "|" + "---|" * 10]
    for r in results:
        if "scores" not in r:
            lines.append(f"| {r['domain']} | {r['engine']} | {r['error']} |" + " |" * 7)
            continue
        base = ref.get(r["domain"])
        speed = f"{r['rollouts_per_s'] / base['rollouts_per_s']:.2f}" if base else ""
        paired = base and base is not r and r["engine"] != "null"
        diff = str(difference([r["scores"]], [base["scores"]])) if paired else ""
        lines.append(f"| {r['domain']} | {r['engine']} | {r['rollouts']} | {r['rollouts_per_s']:.3f} | {speed} | "
                     f"{r['tokens_per_s']:.0f} | {r['start_s']:.0f} | {r['peak_rss_mb']} + {r['server_peak_rss_mb']} "
                     f"| {estimate([r['scores']])} | {diff} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default=",".join(DOMAINS))
    p.add_argument("--engines", default="transformers,vllm-fp32,vllm-bf16")
    p.add_argument("--examples", type=int, default=0, help="first N test examples (0: all)")
    p.add_argument("--k", type=int, default=None, help="samples per example (default: the domain's eval.k)")
    p.add_argument("--timeout-s", type=float, default=3600, help="most seconds one domain x engine may take")
    p.add_argument("--profile", default=None, help="a params.yaml profile (handwritten: the hand-written h0s)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--one", nargs=2, metavar=("DOMAIN", "ENGINE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(*args.one, args.examples, args.k, args.profile)))
        return
    print(f"CPU: {os.cpu_count()} cores, flags {cpu_flags()}", flush=True)
    results = []
    for domain in args.domains.split(","):
        for engine in args.engines.split(","):
            results.append(child(domain, engine, args))
            r = results[-1]
            shown = {k: v for k, v in r.items() if k != "scores"}
            if "scores" in r:
                from whale.stats import estimate

                shown["test_mean_at_k"] = str(estimate([r["scores"]]))
            print(json.dumps(shown), flush=True)
            if args.json:  # after every pair: a bench stopped half way keeps what it measured
                Path(args.json).write_text(json.dumps({"cpu_flags": cpu_flags(), "results": results}, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
