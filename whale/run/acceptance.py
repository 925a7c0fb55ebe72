"""Noise-aware harness acceptance: a challenger replaces the incumbent only on a paired advantage.

Within a harness phase every harness is scored with common random numbers (each example's
samples use the same seeds for the incumbent and every candidate), and at the end the incumbent
is re-scored together with the top challengers on the same extra samples. A challenger's
advantage is the paired difference of per-example mean rewards (challenger minus incumbent) over
the harness split. Rules (``harness_search.accept``):

- ``lcb``: the lower end of the paired bootstrap interval at ``level`` is above ``margin``;
- ``margin``: the mean advantage is above ``margin`` (no interval: cheaper, noisier).

``samples`` names the samples the rule reads: ``all`` of the phase's, or only the re-check's
(``recheck``). The top challengers are chosen on their first samples, so with ``all`` the sample
that made a challenger top also counts towards accepting it (the winner's curse: more false
accepts than the level says); the re-check's samples are drawn after the choice.

Among the challengers that clear the rule the one with the largest mean advantage wins; when none
does, the incumbent stays. Taking the maximum of single noisy scores instead (the reference's
rule) replaces the incumbent with whichever equal candidate happened to be luckiest.
"""
from __future__ import annotations

from dataclasses import dataclass

from whale.stats import Difference, difference


@dataclass(frozen=True)
class AcceptRule:
    rule: str = "lcb"
    level: float = 0.9
    margin: float = 0.0
    samples: str = "all"

    def __post_init__(self):
        if self.rule not in ("lcb", "margin"):
            raise ValueError(f"harness_search.accept.rule must be lcb or margin, got {self.rule!r}")
        if self.samples not in ("all", "recheck"):
            raise ValueError(f"harness_search.accept.samples must be all or recheck, got {self.samples!r}")

    def clears(self, d: Difference) -> bool:
        return (d.lo if self.rule == "lcb" else d.mean) > self.margin

    def describe(self) -> str:
        on = " on the re-check's samples" if self.samples == "recheck" else ""
        if self.rule == "lcb":
            return f"lower end of the paired {self.level:.0%} interval > {self.margin:g}{on}"
        return f"mean paired advantage > {self.margin:g}{on}"


@dataclass(frozen=True)
class Acceptance:
    harness_id: str
    reason: str
    advantages: dict[str, Difference]


def accept(incumbent: str, per_example: dict[str, dict[str, float]], rule: AcceptRule) -> Acceptance:
    """The harness to keep, given each harness's mean reward per example (``incumbent`` included)."""
    base = per_example[incumbent]
    advantages = {}
    for hid, scores in per_example.items():
        if hid == incumbent:
            continue
        common = sorted(set(scores) & set(base))
        if not common:
            continue
        advantages[hid] = difference([scores[e] for e in common], [base[e] for e in common], level=rule.level)
    cleared = {h: d for h, d in advantages.items() if rule.clears(d)}
    if not cleared:
        best = max(advantages.items(), key=lambda kv: kv[1].mean, default=None)
        near = f"; best challenger {best[0]} {_shown(best[1])}" if best else ""
        return Acceptance(incumbent, f"incumbent kept: no challenger cleared {rule.describe()}{near}", advantages)
    hid, d = max(cleared.items(), key=lambda kv: (kv[1].mean, kv[1].lo))
    return Acceptance(hid, f"{hid} accepted: paired advantage {_shown(d)} over {d.n_examples} examples "
                           f"({rule.describe()})", advantages)


def _shown(d: Difference) -> str:
    return f"{d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]"
