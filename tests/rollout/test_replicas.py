"""Rollout replicas: episodes spread over two `whale serve` processes' worth of servers, the same
tokens as in-process, and every replica's weights proved after an update."""
import shutil

import pytest

from tests.run.test_weight_sync import perturb
from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.rollout.backends import make_backend
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.engine import Engine
from whale.rollout.fingerprint import WeightsMismatch
from whale.rollout.serve import make_server
from whale.run.weights import Weights
from whale.train.rsft import RSFTConfig

GREEDY = Sampling(temperature=0.0)


def test_episodes_spread_over_replicas_give_the_in_process_tokens(tiny_model_dir):
    servers = [make_server(str(tiny_model_dir), max_batch=4).start() for _ in range(2)]
    backend = make_backend("openai", str(tiny_model_dir), max_batch=4, base_url=[s.base_url for s in servers])
    try:
        domain = ToyDomain(n=4)
        over = Engine(backend, domain, GREEDY).run(ECHO_HARNESS, domain.items, k=2, seed=0, progress=False)
        local = Engine(TransformersBackend(str(tiny_model_dir)), domain, GREEDY).run(
            ECHO_HARNESS, domain.items, k=2, seed=0, progress=False)
        assert [r.token_ids for r in over] == [r.token_ids for r in local]
        assert min(backend.sent) > 0 and sum(backend.sent) == sum(r.turns for r in over)
    finally:
        backend.close()
        for s in servers:
            s.stop()


def test_a_stale_replica_stops_the_update(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "serving")
    swapping = make_server(str(run_dir / "serving"), allow_load=True, load_roots=[run_dir]).start()
    stale = make_server(str(run_dir / "serving"), allow_load=False).start()  # never reloads
    backend = make_backend("openai", str(run_dir / "serving"), max_batch=2,
                           base_url=[swapping.base_url, stale.base_url])
    try:
        weights = Weights(backend, RSFTConfig(), tiny_model_dir, run_dir)
        weights.start_training()
        perturb(weights.trainer.model)
        with pytest.raises(WeightsMismatch, match=stale.base_url):
            weights._publish()
    finally:
        backend.close()
        swapping.stop()
        stale.stop()
