"""Cross-turn KV reuse: an episode's keys and values survive between its turns.

An episode's token sequence only grows (``whale/rollout/chat.py``), so the context of its next
turn starts with everything the model has already processed: the last turn's prompt and all but
the last generated token (sampled, never fed back). The backend stores those keys and values per
session (an episode) and the next turn prefills only the new tokens. Only the stored tokens that
the new context starts with are reused, so a wrong or reused session can only miss or reuse less,
never corrupt. Entries belong to one set of weights.

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
        """The stored entry of ``session`` under these weights, cut to the tokens it shares with the
        start of ``ids`` (at least one token of ``ids`` is left to prefill), when those are at least
        half of ``ids``: a retried turn re-sends its context, and a blind null-policy turn follows
        another episode's context that went on differently after the stored one's prompt."""
        entry = self.entries.get(session) if session else None
        if entry is None or entry.weights_id != weights_id:
            self.misses += bool(session)
            return None
        n = common_prefix(entry.ids, ids, limit=len(ids) - 1)
        if n == 0 or 2 * n < len(ids):
            self.misses += 1
            return None
        self.hits += 1
        self.reused_tokens += n
        if n == len(entry.ids):
            return entry
        return Entry(entry.ids[:n], [k[:, :n] for k in entry.keys], [v[:, :n] for v in entry.values], weights_id)

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


def common_prefix(a: list[int], b: list[int], limit: int) -> int:
    """How many tokens ``a`` and ``b`` share from the start, at most ``limit``."""
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:  # the usual case, a whole stored turn: one comparison
        return max(n, 0)
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
