"""Prefect tasks: thin, typed, one verb each. The work is done by whale/ and harnesses/.

They take the live ``Run`` (model, store, trainer), which cannot be hashed, so Prefect's input
cache is off (``cache_policy=NONE``); caching and resume are by content keys in DuckDB instead:
a rollout batch, a score or a test evaluation whose key (harness id, weights id, step) is already
stored is read back, never recomputed.
"""
