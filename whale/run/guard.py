"""The null-policy guard: what a harness scores when the model is not the one answering.

Two policies: the uniform null policy (``NullBackend``: random tokens, or a uniform pick among a
turn's choices; no model compute), run on every candidate, and the blind null policy
(``BlindBackend``: the served model answering from another example's context), run on h0 and on
a challenger about to be accepted. A harness is refused above ``max_null_reward``, or, a
candidate, above h0's own null reward by ``null_margin``. The uniform policy is cheap, so its
mean is judged on ``null_samples`` per example, or on ``null_refine_samples`` when a limit lies
within the first estimate's interval over draws (near a limit the draw would otherwise decide);
the blind one costs model compute and runs on few samples, so it refuses only when the lower end
of its bootstrap interval over examples (``blind_level``) is above the limit: on a split of a few
examples its mean alone is noise.
"""
from __future__ import annotations

from collections import defaultdict
from statistics import NormalDist, fmean, variance

from harnesses.sandbox import Limits
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.blind import BlindBackend
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine
from whale.rollout.metrics import per_example_means, summarize
from whale.run.settings import Settings
from whale.stats import Estimate, estimate
from whale.types import Rollout

# Null-policy rollouts draw from a stream of their own, the same in every run: a guard verdict is
# a property of the harness (and, for the blind policy, of the weights), not of the run seed, so a
# harness one run seed accepts is not refused by another on a different draw of the same policy.
NULL_SEED = 104729


def sandbox_limits(settings: Settings) -> Limits:
    return Limits(**settings.sandbox.model_dump())


def null_policy_reward(settings: Settings, domain, source: str, tokenizer, h0_null: float | None = None,
                       seed: int = NULL_SEED) -> float:
    """Mean reward of ``source`` on the harness split under the null policy (no model compute, not
    stored), drawn from the same stream in every run (another ``seed`` measures the draw's noise:
    bench/null_noise.py). ``null_samples`` per example; when a limit of ``null_guard_verdict``
    (given ``h0_null``, a candidate's too) lies inside that first estimate's ``draw_interval`` at
    ``blind_level``, it is judged on ``null_refine_samples`` per example of the same stream."""
    h = settings.harness_search
    engine = Engine(NullBackend(tokenizer), domain, Sampling(**settings.sampling.model_dump()),
                    sandbox_limits(settings))
    examples = domain.examples("harness")
    rollouts = engine.run(source, examples, h.null_samples, seed, progress=False)
    lo, hi = draw_interval(rollouts, h.blind_level)
    limits = [h.max_null_reward] + ([] if h0_null is None else [h0_null + h.null_margin])
    if h.null_refine_samples > h.null_samples and any(lo <= limit <= hi for limit in limits):
        # the same stream, longer: its first samples are the ones just drawn (rollout_seed)
        rollouts = engine.run(source, examples, h.null_refine_samples, seed, progress=False)
    return summarize(rollouts)["mean_at_k"]


def draw_interval(rollouts: list[Rollout], level: float) -> tuple[float, float]:
    """Normal interval at ``level`` of the mean reward over fixed examples, from the spread of each
    example's samples only: the examples are the split's, so only the draw is uncertain (an
    interval over examples would also count how examples differ, and send most choice harnesses
    to more samples for nothing)."""
    per_example: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        per_example[r.example_id].append(r.reward or 0.0)
    n = len(per_example)
    mean = sum(fmean(v) for v in per_example.values()) / n
    var = sum(variance(v) / len(v) for v in per_example.values() if len(v) > 1) / n ** 2
    half = NormalDist().inv_cdf(0.5 + level / 2) * var ** 0.5
    return mean - half, mean + half


def blind_null_estimate(settings: Settings, domain, source: str, backend) -> Estimate:
    """Reward of ``source`` on the harness split under the blind null policy (the served model
    answering from another example's context), ``blind_samples`` per example: model compute. The
    mean over examples with its bootstrap interval at ``blind_level``."""
    h = settings.harness_search
    engine = Engine(BlindBackend(backend), domain, Sampling(**settings.sampling.model_dump()),
                    sandbox_limits(settings))
    rollouts = engine.run(source, domain.examples("harness"), h.blind_samples,
                          NULL_SEED + 1, progress=False, desc="blind null policy")
    return estimate(per_example_means(rollouts), level=h.blind_level)


def blind_guard_verdict(settings: Settings, blind: Estimate, h0_null: float | None = None) -> str | None:
    """``null_guard_verdict`` on the lower end of the blind null policy's interval: refused only
    when the split shows the harness scoring above the limit without the model on the task."""
    reason = null_guard_verdict(settings, blind.lo, h0_null)
    if reason is None:
        return None
    return (f"scores {blind} on the harness split under the blind null policy, the lower end "
            f"(harness_search.blind_level {settings.harness_search.blind_level}) above the limit: "
            + reason.split(": ", 1)[1])


def null_guard_verdict(settings: Settings, null: float, h0_null: float | None = None) -> str | None:
    """Why a harness with null-policy reward ``null`` is refused, or None when it passes: above
    ``max_null_reward``, or (a candidate, given h0's null reward) above h0's by ``null_margin``."""
    h = settings.harness_search
    if null > h.max_null_reward:
        return (f"scores {null:.3f} on the harness split under the null policy (harness_search.max_null_reward "
                f"{h.max_null_reward}): its reward does not come from the model")
    if h0_null is not None and null > h0_null + h.null_margin:
        return (f"scores {null:.3f} on the harness split under the null policy, h0 {h0_null:.3f} "
                f"(harness_search.null_margin {h.null_margin}): it narrows the answer for the model")
    return None
