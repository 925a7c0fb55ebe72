"""`whale run --dry-run`: check every file and setting a run needs and print its plan, spending nothing.

Before GPU hours go into a run: the data splits load, the initial harness passes the candidate
checks and the null-policy guard (where the model's tokenizer is already exported), the model's
config is readable, `rsft.max_seq_len` holds the harness's token budget, and the budget buys whole
phases. The plan counts rollouts per unit of work, phases and evaluations,
and estimates the trainer's memory from the model's config (weights, gradients and AdamW state in
fp32: 16 bytes per parameter, activations not included) and the disk its checkpoints may take
against the free space (whale/run/disk.py). Exit code 2 when something is wrong.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from whale.run.disk import parameters
from whale.run.schedule import epochs_to_steps, harness_phase_rollouts, recheck_rollouts
from whale.run.settings import Settings


@dataclass
class Plan:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.lines.append(text)

    def render(self) -> str:
        out = list(self.lines)
        out += ["", f"{len(self.problems)} problem(s)" + (":" if self.problems else ": ready to run")]
        out += [f"  - {p}" for p in self.problems]
        return "\n".join(out)


def make_plan(settings: Settings, domain: str, condition: str, run_dir: Path | None = None) -> Plan:
    from domains import get_domain
    from harnesses.budgets import read_budgets
    from harnesses.validate import check_candidate
    from whale.run.context import h0_path, h0_source, sandbox_limits

    plan, s = Plan(), settings
    overlay = f" with per_domain.{domain}" if s.per_domain.get(domain) else ""
    plan.add(f"run: {domain} / {condition}, profile {s.profile}{overlay}, seed {s.seed}, data seed {s.data_seed}")
    sizes = {}
    for split in ("weight", "harness", "test"):
        try:
            sizes[split] = len(get_domain(domain).examples(split))
        except (OSError, ValueError) as e:
            plan.problems.append(f"data: the {split} split does not load ({e}); run `whale prepare --domain {domain}`")
    plan.add("data: " + ", ".join(f"{k} {v}" for k, v in sizes.items()))
    wanted, src = s.data.get(domain), s.sources.get(domain)
    real = src is not None and any(getattr(src, k) for k in ("weight", "harness", "test"))
    if wanted and not real and sizes:
        short = {k: (v, getattr(wanted, k)) for k, v in sizes.items() if v != getattr(wanted, k)}
        if short:
            plan.problems.append("data: data/" + domain + " holds " + ", ".join(
                f"{k} {have} (params: {want})" for k, (have, want) in short.items())
                + f": run `whale prepare --domain {domain}` with this profile")

    h0 = h0_path(s, domain)
    if not h0.is_file():
        plan.problems.append(f"h0: no such file {h0}")
    else:
        try:
            source = h0_source(s, domain)
        except (SyntaxError, ValueError) as e:
            plan.problems.append(f"harness_search.h0_budgets: {e}")
            source = h0.read_text()
        reason = check_candidate(source, sandbox_limits(s))
        if reason:
            plan.problems.append(f"h0 {h0}: {reason}")
        budgets = read_budgets(source)
        plan.add(f"h0: {h0} (" + (", ".join(f"{k} {v}" for k, v in budgets.items()) or "budgets not literals") + ")")
        tokens = budgets.get("token_budget")
        if tokens and s.rsft.max_seq_len < tokens:
            plan.problems.append(f"rsft.max_seq_len {s.rsft.max_seq_len} is below h0's token budget {tokens}: "
                                 "accepted rollouts would be cut before the answer that earned them")
        if not reason and "harness" in sizes:
            _null_guard(plan, s, domain, h0, source)

    _model(plan, s)
    _parallel(plan, s)
    _spend(plan, s, sizes)
    _disk(plan, s, condition, sizes, run_dir or Path("runs") / f"{domain}-{condition}")
    return plan


def _null_guard(plan: Plan, s: Settings, domain: str, h0: Path, source: str) -> None:
    """h0 under the null policy, as the run measures it before its first rollout: the harness runs
    in its jail, the policy picks uniformly among each turn's choices; no model compute."""
    from harnesses.jail import JailUnavailable, check_jail
    from whale.run.context import domain_for
    from whale.run.guard import null_guard_verdict, null_policy_reward

    tokenizer_dir = Path(s.model.export_dir)
    if not (tokenizer_dir / "tokenizer_config.json").is_file():
        plan.add(f"h0 null policy: not measured (no tokenizer in {tokenizer_dir} yet; the run measures it at start)")
        return
    try:
        check_jail(s.sandbox.jail)
    except JailUnavailable as e:
        plan.problems.append(f"sandbox.jail: {e}")
        return
    from transformers import AutoTokenizer

    h = s.harness_search
    null = null_policy_reward(s, domain_for(s, domain), source, AutoTokenizer.from_pretrained(tokenizer_dir))
    plan.add(f"h0 null policy: {null:.3f} on the harness split ({h.null_samples} per example, "
             f"{h.null_refine_samples} near a limit; "
             f"harness_search.max_null_reward {h.max_null_reward})")
    reason = null_guard_verdict(s, null)
    if reason:
        plan.problems.append(f"h0 {h0}: {reason}")


def _parallel(plan: Plan, s: Settings) -> None:
    p = s.parallel
    if p.engine == "local":
        plan.add("parallel: candidates and test evaluations one after another in the run's process")
        return
    import importlib.util

    if importlib.util.find_spec("prefect_ray") is None:
        plan.problems.append("parallel.engine: ray needs prefect-ray and ray: pip install -e '.[ray]'")
    where = f"the Ray cluster at {p.address}" if p.address else f"a local Ray the run starts ({p.workers} workers)"
    plan.add(f"parallel: Ray, {where}; each job asks {p.cpus_per_job} CPU and {p.gpus_per_job} GPU; "
             f"test evaluations and re-checks split into {p.workers} jobs")


def _model(plan: Plan, s: Settings) -> None:
    config_path = Path(s.model.export_dir) / "config.json"
    if not config_path.is_file():
        where = "the embedded SmolLM2 (exported on first use)" if s.model.source == "embedded" else s.model.source
        plan.add(f"model: {where}; no config at {config_path} yet, memory not estimated")
        return
    n = parameters(json.loads(config_path.read_text()))
    ranks = s.rsft.processes
    where = f" on each of {ranks} data-parallel ranks" if ranks > 1 else ""
    served = s.served_dtype
    plan.add(f"model: {config_path.parent}, about {n / 1e6:.0f} M parameters; trainer state (fp32 weights, "
             f"gradients, AdamW) about {16 * n / 2**30:.1f} GiB{where} before activations; served weights "
             f"{(2 if served == 'bfloat16' else 4) * n / 2**30:.1f} GiB ({served}) before the KV cache")


def _disk(plan: Plan, s: Settings, condition: str, sizes: dict[str, int], run_dir: Path) -> None:
    from whale.run.conditions import get_condition
    from whale.run.disk import disk_need

    config_path = Path(s.model.export_dir) / "config.json"
    if not config_path.is_file() or "weight" not in sizes or "harness" not in sizes:
        return
    try:
        need = disk_need(s, get_condition(condition), sizes["weight"], sizes["harness"], config_path.parent, run_dir)
    except ValueError:  # a schedule _spend has already reported
        return
    plan.add(f"disk under {run_dir.parent}: {need.describe(s.storage.keep_checkpoints)}")
    if not need.fits:
        plan.problems.append(f"storage: {need.advice(run_dir.parent)}")


def _spend(plan: Plan, s: Settings, sizes: dict[str, int]) -> None:
    if "weight" not in sizes or "harness" not in sizes:
        return
    r, h, sched = s.rsft, s.harness_search, s.schedule
    step = r.prompt_batch * r.k
    try:
        steps = epochs_to_steps(s, sizes["weight"], sched.E)
    except ValueError as e:
        plan.problems.append(f"schedule: {e}")
        return
    unit = sizes["harness"]
    recheck = recheck_rollouts(h.recheck_top, h.recheck_samples, unit)
    harness_phase = harness_phase_rollouts(s, unit)
    cycle = steps * step + harness_phase
    plan.add(f"units: an RSFT step {step} rollouts ({r.prompt_batch} prompts x {r.k}), a candidate's score "
             f"{unit}, a re-check {recheck}")
    plan.add(f"phases: weight {steps} steps = {steps * step} rollouts (E {sched.E}); harness (fixed I {sched.I}, "
             f"M {h.M}) up to {harness_phase}; a fixed whale cycle {cycle}")
    plan.add(f"budget: {sched.budget} weight+harness rollouts, about {sched.budget / cycle:.1f} fixed cycles")
    if "test" in sizes:
        every = s.eval.every
        points = sched.budget // every if every else 0
        plan.add(f"test: {sizes['test']} examples x k {s.eval.k} = {sizes['test'] * s.eval.k} rollouts per "
                 f"evaluation; grid every {every} rollouts ({points} points)"
                 + ("; plus every phase boundary" if s.eval.phases else ""))
    if cycle > sched.budget:
        plan.problems.append(f"schedule.budget {sched.budget} is below one fixed cycle ({cycle} rollouts): "
                             "whale would never finish a harness phase")
