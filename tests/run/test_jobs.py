"""Rollout jobs: split by examples for workers, joined back in order; requests read back what is stored."""
from whale.run.jobs import LocalDispatch, RolloutJob, shard
from whale.types import Example, RolloutContext


def job(n: int) -> RolloutJob:
    examples = tuple(Example(f"e{i}", "harness", {}, {}) for i in range(n))
    return RolloutJob(None, "chess_puzzles", "/data", "", "w", "src", examples, 2, 7, RolloutContext(), "eval")


def test_a_job_is_split_by_examples_in_order():
    pieces = shard(job(5), 2)
    assert [[e.id for e in p.examples] for p in pieces] == [["e0", "e1", "e2"], ["e3", "e4"]]
    assert [p.desc for p in pieces] == ["eval [1]", "eval [2]"] and sum(p.size for p in pieces) == job(5).size
    assert shard(job(1), 4) == [job(1)] and shard(job(5), 1) == [job(5)]


def test_a_request_reads_back_its_stored_parts_and_rolls_out_only_the_rest(tmp_path, tiny_model_dir, monkeypatch):
    from whale.run.conditions import get_condition
    from whale.run.context import Request, Run
    from whale.run.settings import load_settings
    from whale.testing import make_project

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    run = Run(load_settings("params.yaml", None, overrides, "chess_puzzles"), "chess_puzzles",
              get_condition("harness_only"), "r")
    try:
        h0 = run.seed_harness()
        examples = run.domain.examples("harness")
        parts = [(run.key(1, "harness", 1, h0, [ex], 1, 7), [ex]) for ex in examples]
        (first,) = run.rollouts([Request(parts[:1], "first part")])
        seen = []
        dispatch = run.dispatch

        class Recording(LocalDispatch):
            def __call__(self, jobs):
                seen.extend(jobs)
                return super().__call__(jobs)

        run.dispatch = Recording(run.engine)
        (both,) = run.rollouts([Request(parts, "both parts")])
        assert [[e.id for e in j.examples] for j in seen] == [[examples[1].id]]
        assert both.parts[0] == first.parts[0] and len(both.rollouts) == 2
        seen.clear()
        run.rollouts([Request(parts, "again")])
        assert seen == []  # all stored: nothing dispatched
    finally:
        run.dispatch = dispatch
        run.close()


def test_a_smoke_error_ends_its_request_before_the_rest_is_dispatched(tmp_path, tiny_model_dir, monkeypatch):
    from whale.run.conditions import get_condition
    from whale.run.context import Request, Run, h0_source
    from whale.run.settings import load_settings
    from whale.testing import make_project

    overrides = make_project(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    settings = load_settings("params.yaml", None, overrides, "chess_puzzles")
    run = Run(settings, "chess_puzzles", get_condition("harness_only"), "r")
    try:
        source = h0_source(settings, "chess_puzzles")
        broken = run.archive.add(source.replace("    def act(self, completion):\n",
                                                "    def act(self, completion):\n        raise ValueError('no')\n"),
                                 origin="seed")
        examples = run.domain.examples("harness")
        parts = [(run.key(1, "harness", 2, broken, [ex], 1, 7), [ex]) for ex in examples]
        (result,) = run.rollouts([Request(parts, "broken", smoke=True)])
        assert "no" in result.error and len(result.parts) == 1
        assert run.store.stored_rollouts(parts[1][0]) is None  # the rest was never rolled out
    finally:
        run.close()
