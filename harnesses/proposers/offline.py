"""The offline proposer: failure-directed edits of the incumbent's source, no network.

It reads the parent's failure profile from the harness-split rollouts (how often episodes end
unformatted, truncated, at the turn cap, with a wrong answer, with a tool error, without using a
tool), ranks the domain's primitives by the failures they address times a prior, and applies the
best ones to the parent's source, one mechanism per candidate. The parent is the incumbent,
unless another harness of the archive ties it on reward under the same weights with fewer
unsolved failures (a stepping stone: it searches, or stops truncating, where the incumbent does
not, and the reward cannot show it yet). Primitives already in the parent's lineage, sources
already in the archive and, when the run offers the check (``ProposerContext.duplicate``), edits
that would replay the parent's recorded episodes unchanged are skipped, so their slot goes to the
next edit instead of to a candidate the run would reject unevaluated. Seeded randomness only breaks
ties, so the same run state and seed give the same candidates. Candidates are ordinary harness
modules: the incumbent's code plus a short commented layer or an in-place edit.
"""
from __future__ import annotations

import random
from collections.abc import Callable

import duckdb

from harnesses.proposers.base import Candidate, Proposal, ProposerContext, proposer_view
from harnesses.proposers.frontier import draw, example_means, frontier
from harnesses.proposers.primitives import (
    DomainInfo,
    Edit,
    NotApplicable,
    Primitive,
    applied_tags,
    library,
)
from harnesses.proposers.profile import (  # noqa: F401  (failure_profile, unsolved: the proposer's API)
    failure_profile,
    lineage_components,
    stepping_stone,
    unsolved,
)
from harnesses.proposers.variation import Variant, compose, crossover, mutate
from harnesses.sandbox import static_violations
from harnesses.validate import masked
from whale.ids import harness_id  # the archive's content address: a candidate's file name

# A primitive that addresses none of the measured failures still ranks by its prior.
BASE_RATE = 0.05
# What the proposer may offer besides single primitives (harnesses.proposers.variation).
OPERATORS = ("compose", "crossover", "mutate")


def rank(primitives: tuple[Primitive, ...], profile: dict, rng: random.Random) -> list[Primitive]:
    """Primitives by prior x (rate of the failures they address + a base rate); ties by ``rng``."""
    draws = [rng.random() for _ in primitives]
    scored = [(-round(p.prior * (sum(profile.get(a, 0.0) for a in p.addresses) + BASE_RATE), 9), d, i)
              for i, (p, d) in enumerate(zip(primitives, draws, strict=False))]
    return [primitives[i] for _, _, i in sorted(scored)]


class OfflineProposer:
    """Up to ``ctx.M`` candidates: the best single primitive on the stepping stone, then one per
    operator in ``operators`` that has something new (``compose``, ``crossover``, ``mutate``:
    harnesses.proposers.variation; they take turns over iterations), each drawing its parent from
    the archive's frontier; more single primitives fill what is left. A candidate that would
    replay its parent unchanged (``ctx.duplicate``) gives its slot to the next. Fewer (possibly
    none) when nothing new is left."""

    name = "offline"

    def __init__(self, seed: int = 0, operators: tuple[str, ...] = ()):
        unknown = set(operators) - set(OPERATORS)
        if unknown:
            raise ValueError(f"unknown offline operators {sorted(unknown)}; known: {', '.join(OPERATORS)}")
        self.seed, self.operators = seed, tuple(operators)

    def propose(self, ctx: ProposerContext) -> Proposal:
        if not (ctx.archive_dir / f"{ctx.incumbent_id}.py").is_file():
            raise FileNotFoundError(f"incumbent {ctx.incumbent_id} is not in the archive {ctx.archive_dir}")
        info, primitives = library(ctx.domain)
        if ctx.prompt_only:
            primitives = tuple(p for p in primitives if p.prompt_only)
        view = proposer_view(ctx)
        try:
            parent, profile = stepping_stone(view, ctx.incumbent_id, info.tool_expected)
            front = frontier(example_means(view, profile["weights_id"])) if profile["n"] else {}
            known = {h: (_lineage(view, ctx, h), profile if h == parent else failure_profile(view, h))
                     for h in {parent, *front}}
        finally:
            view.close()
        rng = random.Random(f"offline:{self.seed}:{ctx.cycle}:{ctx.iteration}")
        lineage = known[parent][0]
        source = (ctx.archive_dir / f"{parent}.py").read_text()
        # prompt-only mode: every candidate equals the incumbent up to prompt text (its validation)
        base = masked((ctx.archive_dir / f"{ctx.incumbent_id}.py").read_text()) if ctx.prompt_only else None
        edits = self._edits(rank(primitives, profile, rng), source, info, lineage, ctx, base)
        seen: set[str] = set()
        # The best single edit keeps a slot; the operators take turns over iterations for the rest.
        slots = ctx.M - 1 if edits else ctx.M
        turn = ctx.iteration % len(self.operators) if self.operators else 0
        variants = []
        for kind in self.operators[turn:] + self.operators[:turn]:
            found = _variant(kind, ctx, front, known, parent, primitives, info, rng) if len(variants) < slots else None
            if found and _new(found[0].source, seen, ctx, base):
                seen.add(harness_id(found[0].source))
                if _changes(ctx, found[0].source, found[1]):
                    variants.append(found)
        edits = [(p, e) for p, e in edits if harness_id(e.source) not in seen]
        ties = f"{parent}, which ties incumbent {ctx.incumbent_id} on reward"
        label = parent if parent == ctx.incumbent_id else ties
        candidates = [Candidate(source=e.source, hypothesis=_hypothesis(p, profile, label),
                                axis=p.axis, components=lineage + [e.tag], parents=[parent],
                                origin="offline")
                      for p, e in _diverse(edits, ctx.M - len(variants), lambda e: _changes(ctx, e.source, [parent]))]
        candidates += [Candidate(source=v.source, hypothesis=v.hypothesis, axis=v.axis,
                                 components=known[parents[0]][0] + v.tags, parents=parents, origin="offline")
                       for v, parents in variants]
        return Proposal(candidates=candidates, proposer=self.name, model=None)

    @staticmethod
    def _edits(ranked: list[Primitive], parent: str, info: DomainInfo, lineage: list[str],
               ctx: ProposerContext, base: str | None) -> list[tuple[Primitive, Edit]]:
        """Applicable, new, valid edits of the parent's source, in rank order."""
        out, seen = [], set()
        for p in ranked:
            try:
                edit = p.apply(parent, info)
            except NotApplicable:
                continue
            if edit.tag in lineage or not _new(edit.source, seen, ctx, base):
                continue
            seen.add(harness_id(edit.source))
            out.append((p, edit))
        return out


def _new(source: str, seen: set[str], ctx: ProposerContext, base: str | None) -> bool:
    """Not proposed in this call, not archived, statically clean and (prompt-only mode, ``base``
    the incumbent's mask) equal to the incumbent up to prompt text."""
    hid = harness_id(source)
    if hid in seen or (ctx.archive_dir / f"{hid}.py").exists() or static_violations(source):
        return False
    return base is None or masked(source) == base


def _changes(ctx: ProposerContext, source: str, parents: list[str]) -> bool:
    """False when ``source`` would replay one of its parents' recorded episodes unchanged."""
    return ctx.duplicate is None or not any(ctx.duplicate(source, p) for p in parents)


def _lineage(view: duckdb.DuckDBPyConnection, ctx: ProposerContext, hid: str) -> list[str]:
    """Mechanisms in ``hid``: its ancestors' components, then tags its source carries besides."""
    lineage = lineage_components(view, hid)
    return lineage + [t for t in applied_tags((ctx.archive_dir / f"{hid}.py").read_text()) if t not in lineage]


def _variant(kind: str, ctx: ProposerContext, front: dict, known: dict, stone: str,
             primitives: tuple[Primitive, ...], info: DomainInfo,
             rng: random.Random) -> tuple[Variant, list[str]] | None:
    """One candidate of operator ``kind`` and its parents, or None."""
    parent = draw(front, rng) or stone
    lineage, profile = known[parent]
    source = (ctx.archive_dir / f"{parent}.py").read_text()
    led = (f"frontier: best on {len(front[parent])} of the harness-split examples" if parent in front
           else "no frontier yet")
    if kind == "compose":
        v = compose(source, rank(primitives, profile, rng), info, lineage)
        parents = [parent]
    elif kind == "crossover":
        other = draw(front, rng, exclude=(parent,))
        if other is None:
            return None
        v = crossover(source, lineage, known[other][0], primitives, info)
        parents = [parent, other]
        led += f"; {other} best on {len(front[other])}"
    else:
        v = mutate(source, info, lineage, rng, ctx.prompt_only)
        parents = [parent]
    if v is None:
        return None
    return Variant(v.source, v.tags, v.axis, f"{kind} of {parent} ({led}): {v.hypothesis}"), parents


def _diverse(edits: list[tuple[Primitive, Edit]], m: int,
             keep: Callable[[Edit], bool] = lambda e: True) -> list[tuple[Primitive, Edit]]:
    """The best ``m`` edits that ``keep`` admits, one per axis first (as the Claude proposer is
    asked to), then by rank. ``keep`` is asked only of edits that would be chosen, at most once each."""
    chosen, axes, refused = [], set(), set()

    def take(i: int) -> bool:
        if i in refused or edits[i] in chosen:
            return False
        if not keep(edits[i][1]):
            refused.add(i)
            return False
        chosen.append(edits[i])
        return True

    for i, (p, _) in enumerate(edits):
        if len(chosen) < m and p.axis not in axes and take(i):
            axes.add(p.axis)
    for i in range(len(edits)):
        if len(chosen) < m:
            take(i)
    return sorted(chosen, key=edits.index)


def _hypothesis(p: Primitive, profile: dict, parent: str) -> str:
    """The primitive's claim plus the evidence it was chosen on."""
    if not profile["n"]:
        return f"{p.hypothesis} (no harness-split rollouts of {parent} yet)"
    seen = sorted((a for a in p.addresses if profile[a] > 0), key=lambda a: -profile[a])
    rates = ", ".join(f"{a.replace('_', ' ')} {profile[a]:.0%}" for a in seen) or "none of its failures seen"
    return f"{p.hypothesis} (parent {parent}: {rates} of {profile['n']} harness rollouts)"
