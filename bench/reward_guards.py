"""The reward guards on real harnesses and their cost, side by side in one run.

For each backend (the transformers engine and vLLM, as params.yaml configures them), domain and
harness (the seed h0, the default h0, and any harness files given), on the harness split under
the base weights with the run's sampling:
- the model's mean reward, and how many rollouts the engine zeroed as ``leak`` or ``unauthored``;
- the null reward under the uniform null policy (``null_samples`` per example, no model) and under
  the blind null policy (``--blind-samples`` per example: the model answering from another
  example's context), and whether ``null_guard_verdict`` and ``blind_guard_verdict`` refuse it;
- seconds of each: the harness's own evaluation (one sample per example, as a candidate is
  scored), the uniform null and the blind null, and the guard's share of the evaluation.

The per-rollout cost of the leak and authorship checks inside the engine is timed apart (they run
on every rollout, RSFT sampling included): seconds in ``Domain.leak`` and ``caused_by_harness``
against the rollouts' wall time.

    .venv/bin/python bench/reward_guards.py --json runs/bench/reward_guards.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOMAINS = ("chess_puzzles", "search_qa", "math_reasoning")


class Timed:
    """Wraps a function and adds the seconds spent in it to ``total``."""

    def __init__(self, fn):
        self.fn, self.total = fn, 0.0

    def __call__(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.total += time.perf_counter() - t


def one(domain_name: str, label: str, source: str, backend, k: int, blind_samples: int, kind: str) -> dict:
    import whale.rollout.engine as engine_module
    from bench.vllm_engines import cpu_flags
    from whale.rollout.backends.base import Sampling
    from whale.rollout.engine import Engine
    from whale.rollout.metrics import summarize
    from whale.run.context import domain_for
    from whale.run.guard import (
        blind_guard_verdict,
        blind_null_estimate,
        null_guard_verdict,
        null_policy_reward,
        sandbox_limits,
    )
    from whale.run.settings import load_settings

    settings = load_settings(ROOT / "params.yaml", None, {"harness_search": {"blind_samples": blind_samples}},
                             domain_name)
    domain = domain_for(settings, domain_name, ROOT / "data")
    examples = domain.examples("harness")
    leak, caused = Timed(domain.leak), Timed(engine_module.caused_by_harness)
    domain.leak, engine_module.caused_by_harness = leak, caused
    try:
        engine = Engine(backend, domain, Sampling(**settings.sampling.model_dump()), sandbox_limits(settings))
        t = time.perf_counter()
        rollouts = engine.run(source, examples, k, settings.seed, progress=False)
        evaluate_s = time.perf_counter() - t
    finally:
        engine_module.caused_by_harness = caused.fn
    t = time.perf_counter()
    uniform = null_policy_reward(settings, domain, source, backend.tokenizer)
    uniform_s = time.perf_counter() - t
    t = time.perf_counter()
    blind = blind_null_estimate(settings, domain, source, backend)
    blind_s = time.perf_counter() - t
    per_candidate = evaluate_s / k  # a candidate is scored with one sample per example
    return {
        "backend": kind, "domain": domain_name, "harness": label, "examples": len(examples), "k": k,
        "mean_reward": summarize(rollouts)["mean_at_k"],
        "leak": sum("leak" in r.verdict for r in rollouts),
        "unauthored": sum("unauthored" in r.verdict for r in rollouts),
        "uniform_null": uniform, "blind_null": round(blind.mean, 4),
        "blind_interval": [round(blind.lo, 4), round(blind.hi, 4)],
        "blind_samples": blind_samples,
        "refused_before": null_guard_verdict(settings, uniform),
        "refused_after": null_guard_verdict(settings, uniform) or blind_guard_verdict(settings, blind),
        "evaluate_s": round(evaluate_s, 1), "uniform_null_s": round(uniform_s, 1), "blind_null_s": round(blind_s, 1),
        "guard_share_of_candidate_eval": round((uniform_s + blind_s) / per_candidate, 3),
        "checks_s": round(leak.total + caused.total, 3), "checks_share_of_rollouts": round(
            (leak.total + caused.total) / evaluate_s, 4),
        "cpu_flags": cpu_flags(),
    }


def rebuild(domain: str, names: list[str]) -> str:
    """The seed of ``domain`` with the lineage tags ``names`` applied in order, as the offline
    proposer applied them (the found harness of a run, from its lineage): the library's primitives
    and the mutations (``set_<name>_<value>``, ``drop_<line>_<n>``: that line of the source the
    mutation was drawn on, so a drop keeps its place in the order)."""
    from harnesses.proposers.primitives import library
    from harnesses.proposers.primitives.mutate import drop_sentence_at, set_constant
    from harnesses.proposers.variation import primitive_of_tag

    info, primitives = library(domain)
    source = (ROOT / f"harnesses/seeds/{domain}.py").read_text()
    for name in names:
        p = primitive_of_tag(name, primitives)
        if p is not None:
            source = p.apply(source, info).source
        elif name.startswith("set_"):
            source = set_constant(source, name).source
        elif name.startswith("drop_"):
            source = drop_sentence_at(source, name, info.marker).source
        else:
            known = ", ".join(q.name for q in primitives)
            raise ValueError(f"--found: {domain} has no primitive {name!r} (nor is it a set_/drop_ mutation); "
                             f"known: {known}")
    return source


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default=",".join(DOMAINS))
    p.add_argument("--harness", action="append", default=[], metavar="DOMAIN=PATH",
                   help="another harness to measure (a found one), repeatable")
    p.add_argument("--found", action="append", default=[], metavar="DOMAIN=PRIMITIVE+PRIMITIVE",
                   help="a harness the search found, rebuilt from the seed by the offline library's primitives "
                        "its lineage names, in order (e.g. chess_puzzles=legal_choices+annotated_moves)")
    p.add_argument("--k", type=int, default=2, help="samples per harness-split example of the evaluation")
    p.add_argument("--blind-samples", type=int, default=4,
                   help="samples per harness-split example of the blind null policy (params.yaml's may be 0)")
    p.add_argument("--backends", default="transformers,vllm", help="backend.kind values, one after the other")
    p.add_argument("--json", type=Path, help="write the rows here as they come")
    args = p.parse_args(argv)
    from bench.vllm_engines import emit
    from whale.run.context import h0_path, make_engine, model_dir
    from whale.run.settings import load_settings

    extra = [h.split("=", 1) for h in args.harness]
    rows = []
    for kind in args.backends.split(","):
        settings = load_settings(ROOT / "params.yaml", overrides={"backend": {"kind": kind}})
        backend = make_engine(settings, None, model_dir(settings), log_dir="/tmp/whale-bench-guards").backend
        try:
            for d in args.domains.split(","):
                settings = load_settings(ROOT / "params.yaml", domain=d)
                todo = {"seed h0": ROOT / f"harnesses/seeds/{d}.py", "default h0": ROOT / h0_path(settings, d)}
                todo.update({Path(path).name: Path(path) for dom, path in extra if dom == d})
                sources = {f"{label} ({path.relative_to(ROOT) if path.is_relative_to(ROOT) else path})":
                           path.read_text() for label, path in todo.items()
                           if not (label == "default h0" and path == todo["seed h0"])}  # the seed is the default
                sources.update({f"found: seed + {names}": rebuild(d, names.split("+"))
                                for dom, names in (f.split("=", 1) for f in args.found) if dom == d})
                for label, source in sources.items():
                    emit(one(d, label, source, backend, args.k, args.blind_samples, kind), rows, args.json)
        finally:
            if hasattr(backend, "close"):
                backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
