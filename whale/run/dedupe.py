"""Candidates that would not change a rollout: replayed against their parent's recorded episodes.

A candidate is a duplicate of its parent when, fed the replies the model gave in the parent's
latest harness-split evaluation, it renders the same token stream turn by turn (prompts, tool
observations and answer prefixes all land in it), asks for each reply with the same token limit,
stops and choices as the parent does, and ends every episode with the same stop reason and
reward. Such a candidate cannot score differently from its parent under those weights except by
sampling noise, so its evaluation budget is better spent elsewhere. The parent is replayed too,
so an environment that does not replay its own record never makes a duplicate. It runs the
hooks and the environment of both, never the model.
"""
from __future__ import annotations

from whale.rollout.backends.base import Sampling
from whale.rollout.backends.recorded import RecordedBackend
from whale.rollout.engine import Engine
from whale.run.guard import sandbox_limits
from whale.run.settings import Settings


def same_behaviour(settings: Settings, domain, tokenizer, source: str, parent: str, recorded: list[dict]) -> bool:
    """True when ``source`` and ``parent`` replay the recorded episodes (dicts with
    ``example_id``, ``token_ids``, ``mask``, ``reward`` and ``stop_reason``, the parent's) alike
    and as recorded. False on no record, a context off the record or any other difference."""
    by_id = {r["example_id"]: r for r in recorded}
    examples = [e for e in domain.examples("harness") if e.id in by_id]
    if not recorded or len(examples) != len(by_id):
        return False
    outcomes = [_replay(settings, domain, tokenizer, s, examples, recorded) for s in (parent, source)]
    if None in outcomes or outcomes[0] != outcomes[1]:
        return False
    recorded_outcome = {r["example_id"]: (tuple(r["token_ids"]), r["stop_reason"], r["reward"] or 0.0)
                        for r in recorded}
    return outcomes[0][1] == recorded_outcome


def _replay(settings: Settings, domain, tokenizer, source: str, examples, recorded: list[dict]):
    """(what each request asked for, each example's token stream, stop reason and reward), or None
    when the harness asked for a reply off the record."""
    backend = RecordedBackend(tokenizer, [(r["token_ids"], r["mask"]) for r in recorded])
    engine = Engine(backend, domain, Sampling(**settings.sampling.model_dump()), sandbox_limits(settings))
    replayed = engine.run(source, examples, 1, settings.seed, progress=False, desc="replay against parent")
    if backend.divergences:
        return None
    return backend.asked, {r.example_id: (tuple(r.token_ids), r.stop_reason, r.reward or 0.0) for r in replayed}
