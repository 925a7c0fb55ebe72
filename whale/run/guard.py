"""The null-policy guard: what a harness scores when the model is not the one answering.

Two policies: the uniform null policy (``NullBackend``: random tokens, or a uniform pick among a
turn's choices; no model compute), run on every candidate, and the blind null policy
(``BlindBackend``: the served model answering from another example's context), run on h0 and on
a challenger about to be accepted. A harness is refused above ``max_null_reward``, or, a
candidate, above h0's own null reward by ``null_margin``. The uniform policy is cheap, so its
mean is judged on ``null_samples`` per example; the blind one costs model compute and runs on few
samples, so it refuses only when the lower end of its bootstrap interval over examples
(``blind_level``) is above the limit: on a split of a few examples its mean alone is noise.
"""
from __future__ import annotations

from harnesses.sandbox import Limits
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.blind import BlindBackend
from whale.rollout.backends.null import NullBackend
from whale.rollout.engine import Engine
from whale.rollout.metrics import per_example_means, summarize
from whale.run.settings import Settings
from whale.stats import Estimate, estimate

NULL_SEED = 104729  # null-policy rollouts draw from a stream of their own


def sandbox_limits(settings: Settings) -> Limits:
    return Limits(**settings.sandbox.model_dump())


def null_policy_reward(settings: Settings, domain, source: str, tokenizer) -> float:
    """Mean reward of ``source`` on the harness split under the null policy, ``null_samples`` per
    example (no model compute, not stored: one sample per example is too noisy to judge by;
    measured on a chess candidate: 0.44 and 0.12 with two seeds at one sample, 0.19 at eight)."""
    engine = Engine(NullBackend(tokenizer), domain, Sampling(**settings.sampling.model_dump()),
                    sandbox_limits(settings))
    rollouts = engine.run(source, domain.examples("harness"), settings.harness_search.null_samples,
                          settings.seed + NULL_SEED, progress=False)
    return summarize(rollouts)["mean_at_k"]


def blind_null_estimate(settings: Settings, domain, source: str, backend) -> Estimate:
    """Reward of ``source`` on the harness split under the blind null policy (the served model
    answering from another example's context), ``blind_samples`` per example: model compute. The
    mean over examples with its bootstrap interval at ``blind_level``."""
    h = settings.harness_search
    engine = Engine(BlindBackend(backend), domain, Sampling(**settings.sampling.model_dump()),
                    sandbox_limits(settings))
    rollouts = engine.run(source, domain.examples("harness"), h.blind_samples,
                          settings.seed + NULL_SEED + 1, progress=False, desc="blind null policy")
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
