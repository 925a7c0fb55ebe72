"""h0 passes the null-policy guard like every candidate: a hand-written h0 that plays the task
itself stops the run before any rollout is drawn."""
from __future__ import annotations

import pytest

from tests.support.chess import plays_itself
from whale.testing import ROOT

CHOICE = (ROOT / "harnesses" / "examples" / "chess_choice.py").read_text()
PLAYS_ITSELF = plays_itself(CHOICE)


def open_run(tmp_path, tiny_model_dir, h0_source: str, blind_samples: int = 0, seed: int = 0, run_id: str = "r"):
    from whale.run.conditions import get_condition
    from whale.run.context import Run
    from whale.run.settings import load_settings
    from whale.testing import make_project

    overrides = make_project(tmp_path, tiny_model_dir)
    h0 = tmp_path / "h0.py"
    h0.write_text(h0_source)
    overrides["harness_search"]["h0"] = str(h0)
    overrides["harness_search"]["blind_samples"] = blind_samples
    overrides["seed"] = seed
    return Run(load_settings("params.yaml", None, overrides, "chess_puzzles"), "chess_puzzles",
               get_condition("harness_only"), run_id)


def test_an_h0_that_earns_its_reward_through_the_model_is_archived_with_its_null_reward(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = open_run(tmp_path, tiny_model_dir, CHOICE)
    try:
        hid = run.seed_harness()
        (null,) = run.store.query("SELECT null_reward FROM harnesses WHERE harness_id = ?", [hid])[0]
        assert run.archive.status(hid) == ("ok", None) and 0 <= null <= 0.25
        assert run.store.query("SELECT count(*) FROM rollouts")[0][0] == 0
    finally:
        run.close()


def test_the_null_reward_is_the_same_under_every_run_seed(tmp_path, tiny_model_dir, monkeypatch):
    """The guard judges the harness, not the run: two run seeds draw the same null policy, though
    another draw of it reads differently (so the equality is not that of a constant)."""
    from whale.run.guard import NULL_SEED, null_policy_reward

    monkeypatch.chdir(tmp_path)
    nulls = []
    for seed in (0, 7):
        run = open_run(tmp_path, tiny_model_dir, CHOICE, seed=seed, run_id=f"r{seed}")
        try:
            hid = run.seed_harness()
            nulls.append(run.store.query("SELECT null_reward FROM harnesses WHERE harness_id = ?", [hid])[0][0])
            if seed:
                tokenizer = run.engine.backend.tokenizer
                others = {null_policy_reward(run.settings, run.domain, CHOICE, tokenizer, seed=NULL_SEED + d)
                          for d in (1, 2, 3)}
        finally:
            run.close()
    assert nulls[0] == nulls[1]
    assert others - {nulls[0]}


def test_a_null_reward_near_a_limit_is_judged_on_more_samples(tmp_path, tiny_model_dir, monkeypatch):
    """Far from every limit the first ``null_samples`` decide; with a limit inside their interval
    each example is brought to ``null_refine_samples`` (the real engine, its calls recorded)."""
    from whale.rollout.engine import Engine
    from whale.run.guard import null_policy_reward

    monkeypatch.chdir(tmp_path)
    run = open_run(tmp_path, tiny_model_dir, CHOICE)
    try:
        h = run.settings.harness_search.model_copy(update={"max_null_reward": 1.0, "null_samples": 8,
                                                           "null_refine_samples": 32})
        settings = run.settings.model_copy(update={"harness_search": h})
        tokenizer, calls, engine_run = run.engine.backend.tokenizer, [], Engine.run

        def recorded(self, source, examples, k, *args, **kwargs):
            calls.append(k)
            return engine_run(self, source, examples, k, *args, **kwargs)

        monkeypatch.setattr(Engine, "run", recorded)
        first = null_policy_reward(settings, run.domain, CHOICE, tokenizer)
        assert calls == [8] and 0 < first < 1  # the only limit, 1.0, is far
        calls.clear()
        near = null_policy_reward(settings, run.domain, CHOICE, tokenizer, h0_null=first - h.null_margin)
        assert calls == [8, 32] and near != first
    finally:
        run.close()


def test_an_h0_that_solves_without_the_model_stops_the_run_and_stays_refused(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # the second start (a resume) reads the verdict back
        run = open_run(tmp_path, tiny_model_dir, PLAYS_ITSELF)
        try:
            with pytest.raises(ValueError, match=r"h0 .*h0\.py scores [01]\.\d+ on the harness split under the null "
                                                 r"policy .*max_null_reward 0\.25.*not come from the model"):
                run.seed_harness()
            (status, null), = run.store.query("SELECT status, null_reward FROM harnesses")
            assert status == "solves_without_model" and null > 0.25
            assert run.store.query("SELECT count(*) FROM rollouts")[0][0] == 0
        finally:
            run.close()


def test_the_blind_null_policy_refuses_a_harness_through_the_served_model(tmp_path, tiny_model_dir, monkeypatch):
    """The blind guard's own path (served model, another example's context, the archive's verdict),
    on a harness that plays the task itself whatever the model writes."""
    monkeypatch.chdir(tmp_path)
    run = open_run(tmp_path, tiny_model_dir, CHOICE, blind_samples=4)
    try:
        h0 = run.seed_harness()
        assert run.passes_blind_guard(h0, CHOICE)  # h0 passes under the served model too
        hid = run.archive.add(PLAYS_ITSELF, origin="proposed")
        assert not run.passes_blind_guard(hid, PLAYS_ITSELF)
        status, reason = run.archive.status(hid)
        assert status == "solves_without_model" and reason.startswith("blind null policy: scores")
        assert run.archive.null_reward(hid) > 0.25
    finally:
        run.close()
