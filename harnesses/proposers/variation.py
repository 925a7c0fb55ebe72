"""The offline proposer's operators beyond one primitive: composition, crossover and mutation.

Each takes a parent's source (and, for crossover, another frontier harness's mechanisms) and
returns a ``Variant``: the new source, the tags of what it applied and the axis of its first
mechanism, or None when it has nothing new to offer. They reuse the primitives' own edits, so a
composed or crossed candidate reads like a lineage of single edits.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from harnesses.proposers.primitives import DomainInfo, NotApplicable, Primitive
from harnesses.proposers.primitives.mutate import drop_sentence, mutate_constant, set_constant


@dataclass(frozen=True)
class Variant:
    source: str
    tags: list[str]
    axis: str
    hypothesis: str


def primitive_of_tag(tag: str, primitives: tuple[Primitive, ...]) -> Primitive | None:
    """The primitive that writes ``tag``."""
    for p in primitives:
        if tag == p.name or (p.writes and re.fullmatch(p.writes, tag)):
            return p
    return None


def compose(source: str, ranked: list[Primitive], info: DomainInfo, lineage: list[str],
            size: int = 2) -> Variant | None:
    """The ``size`` best-ranked primitives of different axes stacked on ``source``, each applied to
    the previous one's result (a primitive that no longer applies is passed over)."""
    tags, axes, names = [], [], []
    for p in ranked:
        if len(tags) == size:
            break
        if p.axis in axes:
            continue
        try:
            edit = p.apply(source, info)
        except NotApplicable:
            continue
        if edit.tag in lineage or edit.tag in tags:
            continue
        source = edit.source
        tags.append(edit.tag)
        axes.append(p.axis)
        names.append(p.hypothesis)
    if len(tags) < size:
        return None
    return Variant(source, tags, axes[0], "; and ".join(names))


def crossover(source: str, lineage: list[str], other_lineage: list[str], primitives: tuple[Primitive, ...],
              info: DomainInfo) -> Variant | None:
    """``source`` plus the mechanisms of another harness's lineage it lacks, in that lineage's order."""
    tags, axis = [], ""
    for tag in other_lineage:
        if tag in lineage or tag in tags:
            continue
        p = primitive_of_tag(tag, primitives)
        try:
            edit = p.apply(source, info) if p else set_constant(source, tag)
        except NotApplicable:
            continue
        source = edit.source
        tags.append(edit.tag)
        axis = axis or (p.axis if p else "budgets")
    if not tags:
        return None
    return Variant(source, tags, axis, f"adds {', '.join(tags)}, which the other parent has")


def mutate(source: str, info: DomainInfo, lineage: list[str], rng: random.Random, prompt_only: bool) -> Variant | None:
    """One constant or one prompt sentence changed (prompt-only mode: a sentence)."""
    kinds = ["sentence"] if prompt_only else rng.sample(["constant", "sentence"], 2)
    for kind in kinds:
        try:
            if kind == "constant":
                edit = mutate_constant(source, rng, tuple(lineage))
                return Variant(edit.source, [edit.tag], "budgets",
                               f"a constant no primitive sets: {edit.tag.removeprefix('set_')}")
            edit = drop_sentence(source, rng, info.marker)
            if edit.tag not in lineage:
                return Variant(edit.source, [edit.tag], "prompt", "a shorter instruction: one sentence dropped")
        except NotApplicable:
            continue
    return None
