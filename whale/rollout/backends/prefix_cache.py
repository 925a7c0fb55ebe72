"""Cross-turn KV reuse: an episode's keys and values survive between its turns.

An episode's token sequence only grows (``whale/rollout/chat.py``), so the context of its next
turn starts with everything the model has already processed: the last turn's prompt and all but
the last generated token (sampled, never fed back). The backend stores those keys and values per
session (an episode) and the next turn prefills only the new tokens. The stored prefix is checked
token by token, so a wrong or reused session can only miss, never corrupt. Entries belong to one
set of weights.

Past the memory budget a new entry is refused rather than an old one evicted. The engine visits
every live episode once per turn, in the same order: a cyclic scan, on which least-recently-used
eviction never hits once the episodes outgrow the budget (a math test evaluation holds 256
episodes, the default budget about 40 of them), while keeping the entries already held gives
those episodes a hit on every turn. Entries under other weights, which can never hit, go first.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Entry:
    ids: list[int]  # the tokens whose keys and values are stored, in order
    keys: list[torch.Tensor]  # per layer [kv_heads, len(ids), head_dim]
    values: list[torch.Tensor]
    weights_id: str

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class PrefixCache:
    def __init__(self, budget_mb: float):
        self.budget = int(budget_mb * 2**20)
        self.entries: dict[str, Entry] = {}
        self.used = 0
        self.hits = self.misses = self.reused_tokens = self.evicted = self.refused = 0

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def lookup(self, session: str | None, ids: list[int], weights_id: str) -> Entry | None:
        """The stored entry of ``session`` when it is a proper prefix of ``ids`` under these weights."""
        entry = self.entries.get(session) if session else None
        n = len(entry.ids) if entry else 0
        if entry is None or entry.weights_id != weights_id or not 0 < n < len(ids) or ids[:n] != entry.ids:
            self.misses += bool(session)
            return None
        self.hits += 1
        self.reused_tokens += n
        return entry

    def admits(self, session: str, nbytes: int, weights_id: str) -> bool:
        """Whether an entry of ``nbytes`` for ``session`` would be kept: asked before the keys and
        values are copied out of a batch, so a refused entry costs no copy. The session's old entry
        is dropped either way (the new one supersedes it), and entries under other weights go
        first when room is short."""
        self.release(session)
        if self.used + nbytes > self.budget:
            for stale in [s for s, e in self.entries.items() if e.weights_id != weights_id]:
                self.release(stale)
                self.evicted += 1
        if self.used + nbytes > self.budget:
            self.refused += 1
            return False
        return True

    def put(self, session: str, entry: Entry) -> None:
        if self.admits(session, entry.nbytes, entry.weights_id):
            self.entries[session] = entry
            self.used += entry.nbytes

    def release(self, session: str) -> None:
        old = self.entries.pop(session, None)
        if old is not None:
            self.used -= old.nbytes

    def clear(self) -> None:
        self.entries.clear()
        self.used = 0
