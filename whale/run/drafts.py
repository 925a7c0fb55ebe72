"""Drafts: an LLM proposer tries a module on a few harness-split examples before submitting it.

Meta-Harness's proposer runs its code before it hands it in; here the run lends its engine for
that (`try_candidate`). A draft rolls once on the first ``draft_examples`` harness-split
examples under the served weights, with the run's limits and guards. Its rollouts are charged to
the budget (the ``drafts`` table; the harness phase charges them after the proposer returns, the
same count on resume) but are not stored as rollouts: they train nothing and score nothing, so
selection, the frontier and the duplicate replay never see them. The proposer hears rewards,
stop reasons and one transcript, as much as its SQL view of harness-split rollouts shows.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from whale.ids import harness_id
from whale.store import run_queries
from whale.types import Rollout, RolloutContext

TRANSCRIPT_CHARS = 4_000
DRAFT_SEED = 7919  # drafts draw from a stream of their own


def draft_allowance(drafts: int, examples: int, room: int) -> int:
    """Rollouts the drafts of one iteration may spend: ``drafts`` of ``examples`` each, or none
    when ``room`` (what the budget leaves beside the iteration's candidates) cannot hold one."""
    want = drafts * examples
    return want if room >= want else (room // examples) * examples


def make_trial(run, cycle: int, iteration: int, allowance: int) -> Callable[[str], str] | None:
    """The ``ProposerContext.trial`` of one iteration, or None when no draft fits."""
    h = run.settings.harness_search
    if allowance < h.draft_examples:
        return None
    examples = run.domain.examples("harness")[:h.draft_examples]
    # drafts of an interrupted call count
    used = run.store.draft_rollouts(run.run_id, cycle, iteration)
    n = run_queries.drafts_taken(run.store, run.run_id, cycle, iteration)

    def trial(source: str) -> str:
        nonlocal used, n
        if used + len(examples) > allowance:
            raise ValueError(f"no budget left for drafts in this iteration ({used} of {allowance} rollouts "
                             "spent): submit with write_candidate")
        rollouts = run.engine.run(source, examples, 1, run.settings.seed + DRAFT_SEED + n,
                                  RolloutContext(run.run_id, cycle, "harness", iteration), progress=False,
                                  desc="draft")
        used += len(rollouts)
        n += 1
        mean = sum(r.reward for r in rollouts) / len(rollouts)
        run.store.insert("drafts", [{
            "run_id": run.run_id, "cycle": cycle, "iteration": iteration, "draft": n - 1,
            "harness_id": harness_id(source), "weights_id": run.weights_id, "rollouts": len(rollouts),
            "mean_reward": mean, "tokens_out": sum(r.tokens_out for r in rollouts)}])
        return summary(rollouts, mean, allowance - used)

    return trial


def summary(rollouts: list[Rollout], mean: float, left: int) -> str:
    """What the proposer hears of a draft: per rollout the outcome, then the first transcript."""
    lines = [f"draft rolled on {len(rollouts)} harness-split example(s): mean reward {mean:.3f}; "
             f"{left} draft rollouts left this iteration"]
    for r in rollouts:
        row = {"example_id": r.example_id, "reward": r.reward, "formatted": r.formatted,
               "stop_reason": r.stop_reason, "turns": r.turns, "tool_calls": r.tool_calls,
               "tokens_out": r.tokens_out}
        row.update({k: r.verdict[k] for k in ("leak", "unauthored") if k in r.verdict})
        if r.error:
            row["error"] = r.error[-1_500:]
        lines.append(json.dumps(row))
    shown = rollouts[0]
    transcript = "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in shown.messages)
    if len(transcript) > TRANSCRIPT_CHARS:
        transcript = transcript[:TRANSCRIPT_CHARS // 2] + "\n[...]\n" + transcript[-TRANSCRIPT_CHARS // 2:]
    lines.append(f"transcript of {shown.example_id}:\n{transcript or '(no messages)'}")
    return "\n".join(lines)
