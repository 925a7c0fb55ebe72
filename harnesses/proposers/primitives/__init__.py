"""The offline proposer's library: per domain, the answer format and the primitives to try.

``library(domain)`` returns ``(DomainInfo, primitives)``: the common primitives (nudges, answer
prefix, budgets, prompt sentences) followed by the domain's own. A domain module may name common
primitives its own replace (``REPLACES``).
"""
from __future__ import annotations

import importlib

from domains import NAMES as DOMAINS
from harnesses.proposers.primitives.common import (
    COMMON,
    FAILURES,
    DomainInfo,
    Edit,
    Primitive,
)
from harnesses.proposers.primitives.edit import NotApplicable, applied_tags

__all__ = ["FAILURES", "DomainInfo", "Edit", "NotApplicable", "Primitive",
           "applied_tags", "library"]


def library(domain: str) -> tuple[DomainInfo, tuple[Primitive, ...]]:
    if domain not in DOMAINS:
        raise ValueError(f"the offline proposer has no primitives for domain {domain!r}; "
                         f"known: {', '.join(DOMAINS)}")
    module = importlib.import_module(f"harnesses.proposers.primitives.{domain}")
    replaced = set(getattr(module, "REPLACES", ()))
    return module.INFO, tuple(p for p in COMMON if p.name not in replaced) + module.PRIMITIVES
