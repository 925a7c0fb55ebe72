"""Harness-phase tasks: propose_harnesses -> validate_candidate -> evaluate_harnesses -> select_harness."""
from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

from harnesses.proposers import ProposerContext, propose_with_fallback, resolve_proposer
from harnesses.proposers.frontier import revivals
from harnesses.validate import check_candidate
from tasks import log
from whale.files import write_json
from whale.rollout.metrics import summarize
from whale.run.acceptance import AcceptRule, accept
from whale.run.context import Request, Run, sandbox_limits
from whale.run.dedupe import same_behaviour
from whale.run.drafts import make_trial
from whale.store import RECHECK_ITERATION, run_queries
from whale.types import Example

ROOT = Path(__file__).resolve().parents[1]
# Common random numbers: every harness of a phase is scored on the same seeds per example, so
# differences between harnesses are not differences between draws; the re-check draws anew.
SCORE_SEED, RECHECK_SEED = 7, 7919


def make_proposers(run: Run):
    from harnesses.proposers.offline import OfflineProposer

    search = run.settings.harness_search
    offline = OfflineProposer(seed=run.settings.seed, operators=tuple(search.operators))
    kind = resolve_proposer(search.proposer)
    if kind == "offline":
        return offline, None
    if kind == "replay":
        from harnesses.proposers.replay import ReplayProposer

        return ReplayProposer(search.replay_from), offline
    if kind == "openai":
        from harnesses.proposers.openai_chat import OpenAIProposer

        return OpenAIProposer(**search.openai.model_dump()), offline
    from harnesses.proposers.claude import ClaudeProposer

    return ClaudeProposer(**search.claude.model_dump()), offline


@task(cache_policy=NONE, task_run_name="propose_harnesses-c{cycle}-i{iteration}")
def propose_harnesses(run: Run, cycle: int, iteration: int, incumbent: str, prompt_only: bool,
                      draft_allowance: int = 0) -> list[str]:
    """Ask the proposer for M candidates; archive each (status pending) and return their ids. An
    LLM proposer may first try drafts worth ``draft_allowance`` rollouts (``whale/run/drafts.py``).

    Resume: an iteration whose candidates are already archived is not proposed again.
    """
    known = run_queries.iteration_candidates(run.store, cycle, iteration)
    if known:
        return known
    ctx = ProposerContext(
        run_id=run.run_id, domain=run.domain_name, cycle=cycle, iteration=iteration,
        M=run.settings.harness_search.M, seed=run.settings.seed, incumbent_id=incumbent,
        archive_dir=run.archive.dir, store_path=run.store.path,
        notes_path=ROOT / "domains" / run.domain_name / "notes.md",
        contract_path=ROOT / "harnesses" / "contract.py", prompt_only=prompt_only, store=run.store,
        trial=make_trial(run, cycle, iteration, draft_allowance),
        duplicate=(lambda source, parent: replays_parent(run, source, parent))
        if run.settings.harness_search.skip_duplicates else None,
    )
    primary, fallback = make_proposers(run)
    proposal = propose_with_fallback(primary, fallback, ctx) if fallback else primary.propose(ctx)
    run.store.insert("proposer_calls", [{
        "run_id": run.run_id, "cycle": cycle, "iteration": iteration, "proposer": proposal.proposer,
        "model": proposal.model, "input_tokens": proposal.input_tokens, "output_tokens": proposal.output_tokens,
        "cost_usd": proposal.cost_usd, "fallback_reason": proposal.fallback_reason}])
    if proposal.fallback_reason:
        log(f"cycle {cycle} iteration {iteration}: fell back to the offline proposer ({proposal.fallback_reason})")
    ids = [run.archive.add(c.source, origin=c.origin, parents=c.parents, hypothesis=c.hypothesis, axis=c.axis,
                           components=c.components, cycle=cycle, iteration=iteration) for c in proposal.candidates]
    # What was proposed, in order (the replay proposer reads it back), and the proposer's reasoning,
    # the only record of why a candidate was written.
    write_json(run.dir / "proposals" / f"c{cycle}-i{iteration}.json", {
        "proposer": proposal.proposer, "model": proposal.model,
        "candidates": [{"harness_id": hid, "origin": c.origin, "parents": c.parents, "hypothesis": c.hypothesis,
                        "axis": c.axis, "components": c.components} for hid, c in zip(ids, proposal.candidates,
                                                                                        strict=True)],
        "messages": proposal.transcript,
        **({"failed_session": proposal.failed_transcript} if proposal.failed_transcript else {})})
    return ids


@task(cache_policy=NONE, task_run_name="validate_candidate-{harness_id}")
def validate_candidate(run: Run, harness_id: str, incumbent: str, prompt_only: bool) -> bool:
    """Static rules, the contract and (prompt-only mode) the syntax-tree check, recorded as `invalid`;
    a replay of the parent's episodes (`duplicate`); then the null-policy guard (`solves_without_model`)."""
    status = run.archive.status(harness_id)
    if status[0] != "pending":
        return status[0] == "ok"
    source = run.archive.source(harness_id)
    reason = check_candidate(source, sandbox_limits(run.settings), run.archive.source(incumbent), prompt_only)
    if reason:
        run.archive.set_status(harness_id, "invalid", reason)
        return False
    parent = duplicated_parent(run, harness_id, source)
    if parent:
        run.archive.set_status(harness_id, "duplicate", f"replays the recorded harness-split episodes of its "
                               f"parent {parent} token for token, with the same rewards")
        return False
    return run.passes_null_guard(harness_id, source)


def duplicated_parent(run: Run, harness_id: str, source: str) -> str | None:
    """The parent whose recorded episodes ``source`` replays unchanged (``harness_search.skip_duplicates``)."""
    if not run.settings.harness_search.skip_duplicates:
        return None
    return next((p for p in run.archive.parents(harness_id) if replays_parent(run, source, p)), None)


def replays_parent(run: Run, source: str, parent: str) -> bool:
    """True when ``source`` replays the latest recorded harness-split episodes of the archived
    harness ``parent`` token for token, with the same rewards (whale/run/dedupe.py)."""
    recorded = run.store.recorded_episodes(run.run_id, parent)
    return bool(recorded) and same_behaviour(run.settings, run.domain, run.engine.backend.tokenizer, source,
                                             run.archive.source(parent), recorded)


@task(cache_policy=NONE, task_run_name="evaluate_harnesses-c{cycle}-i{iteration}")
def evaluate_harnesses(run: Run, cycle: int, iteration: int, harness_ids: list[str],
                       smoke: bool = False) -> list[dict | None]:
    """One rollout per harness-split example for each harness under the current weights, all handed
    to the run's dispatch at once (Ray workers run them in parallel); stores and returns the scores.

    With ``smoke`` each harness's first ``smoke_examples`` run first and any error marks the
    candidate `error` before the rest of its budget is spent. None for a broken candidate.
    """
    scores: dict[str, dict | None] = {}
    for hid in harness_ids:
        scores[hid] = run_queries.harness_score(run.store, run.run_id, hid, run.weights_id, cycle, iteration)
    todo = [h for h in harness_ids if scores[h] is None and run.archive.status(h)[0] != "error"]
    examples = run.domain.examples("harness")
    first = run.settings.harness_search.smoke_examples if smoke else 0
    chunks = [examples[:first], examples[first:]] if first else [examples]
    requests = [Request([(_key(run, cycle, iteration, hid, chunk, 1), chunk) for chunk in chunks],
                        f"harness {hid} i{iteration}", smoke) for hid in todo]
    for hid, result in zip(todo, run.rollouts(requests), strict=True):
        if result.error:
            run.archive.set_status(hid, "error", result.error)
            continue
        if run.archive.status(hid)[0] == "pending":
            run.archive.set_status(hid, "ok")
        scores[hid] = _score(run, cycle, iteration, hid, result.rollouts)
    return [scores[h] for h in harness_ids]


def _key(run: Run, cycle: int, step: int, harness_id: str, examples: list[Example], k: int,
         seed_offset: int = SCORE_SEED):
    return run.key(cycle, "harness", step, harness_id, examples, k, run.settings.seed + seed_offset)


def _score(run: Run, cycle: int, iteration: int, harness_id: str, rollouts) -> dict:
    m = summarize(rollouts)
    row = {"run_id": run.run_id, "harness_id": harness_id, "weights_id": run.weights_id, "split": "harness",
           "cycle": cycle, "iteration": iteration, "n": m["n"], "mean_reward": m["mean_at_k"],
           "format_rate": m["format_rate"], "truncation_rate": m["truncation_rate"],
           "error_rate": m["error_rate"], "mean_turns": m["mean_turns"]}
    run.store.insert("scores", [row])
    return {"harness_id": harness_id, "mean_reward": m["mean_at_k"], "mean_turns": m["mean_turns"], "n": m["n"]}


def _ranked(run: Run, cycle: int, recheck: bool, limit: int) -> list[tuple]:
    return run_queries.ranked_scores(run.store, run.run_id, cycle, run.weights_id, limit, recheck)


@task(cache_policy=NONE)
def select_harness(run: Run, cycle: int) -> dict:
    """The best harness of the phase under the current weights (the incoming one included).

    Ties go to fewer mean turns, then to the earlier iteration: a newcomer must be strictly better.
    When the phase was re-checked (``recheck_harnesses``), the re-check scores decide.
    """
    rows = _ranked(run, cycle, True, 1) or _ranked(run, cycle, False, 1)
    hid, score, turns, it = rows[0]
    return {"harness_id": hid, "mean_reward": score, "mean_turns": turns, "iteration": it}


@task(cache_policy=NONE)
def revived_harnesses(run: Run, cycle: int, incoming: str, top: int) -> list[str]:
    """The previous weights' best ``top`` frontier harnesses besides ``incoming``, to be re-scored
    with it (``harness_search.rescore_frontier``; none while the weights have not changed)."""
    return revivals(run.store.con, run.weights_id, incoming, top)


@task(cache_policy=NONE)
def recheck_harnesses(run: Run, cycle: int, incoming: str, top: int, samples: int, sample: bool = True) -> list[str]:
    """The incoming harness and the phase's top ``top`` challengers; with ``sample`` (the budget
    allows it) each gets ``samples`` more samples per harness-split example, the same seeds for
    all, stored as iteration 0."""
    examples = run.domain.examples("harness")
    challengers = [hid for hid, *_ in _ranked(run, cycle, False, top + 1) if hid != incoming][:top]
    if not challengers or not sample:  # nothing to decide between, or no budget left: no samples spent
        return [incoming, *challengers]
    hids = [incoming, *challengers]
    requests = [Request([(_key(run, cycle, RECHECK_ITERATION, hid, examples, samples, RECHECK_SEED), examples)],
                        f"re-check {hid}") for hid in hids]
    for hid, result in zip(hids, run.rollouts(requests), strict=True):
        _score(run, cycle, RECHECK_ITERATION, hid, result.rollouts)
    return hids


@task(cache_policy=NONE)
def accept_harness(run: Run, cycle: int, incoming: str, rechecked: list[str]) -> dict:
    """The phase's accepted harness: a re-checked challenger whose paired advantage over the
    incoming harness clears ``harness_search.accept``, else the incoming one."""
    rule = AcceptRule(**run.settings.harness_search.accept.model_dump())
    rows = run_queries.harness_phase_example_means(run.store, run.run_id, cycle, run.weights_id, rechecked,
                                                   recheck_only=rule.samples == "recheck")
    fresh = bool(rows) or rule.samples == "all"
    if not fresh:  # accept.samples recheck, and no re-check was drawn (no challenger, or no budget left)
        rows = run_queries.harness_phase_example_means(run.store, run.run_id, cycle, run.weights_id, [incoming])
    per_example: dict[str, dict[str, float]] = {}
    turns: dict[str, list[float]] = {}
    for hid, ex, reward, t in rows:
        per_example.setdefault(hid, {})[ex] = reward
        turns.setdefault(hid, []).append(t)
    verdict = accept(incoming, per_example, rule)
    hid, reason = verdict.harness_id, verdict.reason
    if not fresh:
        reason = "incumbent kept: no re-check samples to decide on (harness_search.accept.samples recheck)"
    if hid != incoming and not run.passes_blind_guard(hid, run.archive.source(hid)):
        reason = f"{reason}, then refused: {run.archive.status(hid)[1]}; {incoming} kept"
        hid = incoming
    scores = per_example[hid]
    return {"harness_id": hid, "mean_reward": sum(scores.values()) / len(scores),
            "mean_turns": sum(turns[hid]) / len(turns[hid]), "iteration": RECHECK_ITERATION, "reason": reason}
