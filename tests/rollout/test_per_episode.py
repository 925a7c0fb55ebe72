"""The per-episode driver (``backend.per_episode``) against `whale serve` on loopback: an episode goes
on while another's turn is still out, the records equal the turn-by-turn driver's and the
in-process engine's, and a failed request stops the run with its error."""
from __future__ import annotations

import threading

import pytest

from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.rollout.backends.base import GenRequest, GenResult, Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.backends.openai import OpenAIBackend
from whale.rollout.engine import Engine
from whale.rollout.serve import make_server
from whale.testing import tiny_model

GREEDY = Sampling(temperature=0.0)
SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20)


class CountingBackend(OpenAIBackend):
    """Counts each episode's requests (its turns) by the request's session."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.turns: dict[str, int] = {}
        self.lock = threading.Lock()

    def turn(self, req: GenRequest) -> int:
        with self.lock:
            self.turns[req.session] = self.turns.get(req.session, 0) + 1
            return self.turns[req.session]


class HeldBackend(CountingBackend):
    """Holds the first request of episode 0 until another episode has sent its second turn (or
    ``hold_s`` passes): only a driver that lets episodes go on alone can release it early."""

    hold_s = 3.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.released = threading.Event()
        self.released_early: bool | None = None

    def _complete(self, req: GenRequest, sampling: Sampling) -> GenResult:
        turn = self.turn(req)
        if req.session.endswith(":0") and turn == 1:
            self.released_early = self.released.wait(self.hold_s)
        elif turn == 2:
            self.released.set()
        return super()._complete(req, sampling)


class FailingBackend(CountingBackend):
    def _complete(self, req: GenRequest, sampling: Sampling) -> GenResult:
        if self.turn(req) == 2 and req.session.endswith(":3"):  # a later turn of one episode
            raise RuntimeError("the server answered 500")
        return super()._complete(req, sampling)


@pytest.fixture(scope="module")
def model_dir(tokenizer_dir, tmp_path_factory):
    return tiny_model(tokenizer_dir, tmp_path_factory.mktemp("per_episode"), hidden=128, init=1.0, tied=False)


@pytest.fixture(scope="module")
def server(model_dir):
    srv = make_server(str(model_dir), max_batch=8, window_s=0.02).start()
    yield srv
    srv.stop()


def run(backend, sampling, per_episode, n=3, k=2):
    domain = ToyDomain(n=n)
    return Engine(backend, domain, sampling, per_episode=per_episode).run(
        ECHO_HARNESS, domain.examples("test"), k=k, seed=0, progress=False)


def records(rollouts):
    return [(r.example_id, r.sample_idx, r.token_ids, r.mask, r.stop_reason, r.reward, r.turns, r.error)
            for r in rollouts]


@pytest.mark.parametrize("per_episode, early", [(True, True), (False, False)])
def test_only_the_per_episode_driver_lets_an_episode_go_on_while_another_turn_is_out(server, model_dir,
                                                                                   per_episode, early):
    backend = HeldBackend(server.base_url, str(model_dir), max_batch=8)
    try:
        out = run(backend, GREEDY, per_episode)
    finally:
        backend.close()
    assert backend.released_early is early
    assert all(r.error is None and r.turns == 3 for r in out)


def test_per_episode_records_equal_turn_by_turn_and_in_process(server, model_dir):
    backend = OpenAIBackend(server.base_url, str(model_dir), max_batch=8)
    try:
        assert Engine(backend, ToyDomain(), GREEDY).per_episode  # the default for a server backend
        each, turns = run(backend, SAMPLED, True), run(backend, SAMPLED, False)
        greedy = run(backend, GREEDY, True)
    finally:
        backend.close()
    assert records(each) == records(turns)
    assert max(r.turns for r in each) > 1
    local = TransformersBackend(str(model_dir), max_batch=8)
    assert not Engine(local, ToyDomain(), GREEDY).per_episode  # batches only: turn by turn
    assert records(greedy) == records(run(local, GREEDY, True))


def test_a_failed_request_stops_the_run_with_its_error(server, model_dir):
    backend = FailingBackend(server.base_url, str(model_dir), max_batch=8)
    try:
        with pytest.raises(RuntimeError, match="answered 500"):
            run(backend, GREEDY, True)
        assert records(run(backend, GREEDY, True, n=1, k=1))  # the backend still serves other runs
    finally:
        backend.close()
