"""The blind null policy's verdict: judged on the lower end of its interval over examples, so that
a handful of lucky samples does not refuse a harness and a harness that plays alone still is."""
from __future__ import annotations

from whale.run.guard import blind_guard_verdict, null_guard_verdict
from whale.run.settings import load_settings
from whale.stats import estimate


def blind(per_example: list[float]):
    return estimate(per_example, level=load_settings().harness_search.blind_level)


def test_one_lucky_example_of_two_is_noise_not_a_refusal():
    settings = load_settings()
    noisy = blind([0.0, 1.0])
    assert null_guard_verdict(settings, noisy.mean) is not None  # the mean alone would refuse it
    assert blind_guard_verdict(settings, noisy) is None


def test_a_harness_that_scores_on_every_example_without_the_model_is_refused():
    reason = blind_guard_verdict(load_settings(), blind([1.0] * 4))
    assert reason is not None and "blind_level" in reason and "does not come from the model" in reason


def test_a_split_that_shows_the_score_above_the_limit_refuses_it():
    settings = load_settings()
    assert blind_guard_verdict(settings, blind([1.0] * 12 + [0.0] * 4)) is not None
    assert blind_guard_verdict(settings, blind([1.0] * 2 + [0.0] * 14)) is None


def test_a_challenger_is_held_to_h0s_null_reward_plus_the_margin():
    settings = load_settings()
    est = blind([0.2] * 16)  # under the fixed limit, above h0's 0.05 by more than the margin
    assert blind_guard_verdict(settings, est) is None
    assert "narrows the answer" in blind_guard_verdict(settings, est, h0_null=0.05)
    assert blind_guard_verdict(settings, est, h0_null=0.15) is None


def test_the_null_draw_interval_counts_the_draw_not_how_examples_differ():
    """The harness split's examples are fixed: examples that always or never pay leave nothing
    uncertain, however unlike each other they are; samples that disagree widen the interval."""
    from tests.support.proposer import rollout
    from whale.run.guard import draw_interval

    fixed = [rollout("harness", ex, reward) for ex, reward in [("a", 1.0)] * 8 + [("b", 0.0)] * 8]
    assert draw_interval(fixed, 0.9) == (0.5, 0.5)
    mixed = [rollout("harness", "a", float(i % 2)) for i in range(8)] + [rollout("harness", "b", 0.0)] * 8
    lo, hi = draw_interval(mixed, 0.9)
    assert lo < 0.25 < hi and hi - lo < 0.5
