"""Weight sync over HTTP is proved by the served log-probabilities, never by a path or a name:
a `whale serve` that swaps weights passes, one that kept the old weights stops the run."""
import shutil
from contextlib import contextmanager

import pytest
import torch

from whale.rollout.backends.openai import OpenAIBackend
from whale.rollout.fingerprint import WeightsMismatch, distance, local_logprobs, probe_ids
from whale.rollout.serve import make_server
from whale.run.weights import Weights
from whale.train.rsft import RSFTConfig


def perturb(model, scale: float = 0.05) -> None:
    """What an RSFT update does to the trainer's weights, as far as the server can tell."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(5)) * scale)


@contextmanager
def served_run(tmp_path, model_dir, allow_load: bool, dtype: str = "float32", served_dtype: str | None = None):
    """A run's Weights against a `whale serve` started on the run's serving/ folder (as a vLLM
    restarted on it once); ``allow_load`` False = a server with no weight-update path. The server
    computes in ``dtype``, the trainer too unless ``served_dtype`` tells the run the server's."""
    run_dir = tmp_path / "run"
    shutil.copytree(model_dir, run_dir / "serving")
    srv = make_server(str(run_dir / "serving"), dtype=dtype, allow_load=allow_load, load_roots=[run_dir]).start()
    backend = OpenAIBackend(srv.base_url, str(run_dir / "serving"), max_batch=2)
    try:
        config = RSFTConfig(dtype="float32" if served_dtype else dtype)
        yield Weights(backend, config, model_dir, run_dir, fingerprint_tol=1e-3, served_dtype=served_dtype), backend
    finally:
        backend.close()
        srv.stop()


@pytest.mark.parametrize("hot_swap", [True, False])
def test_an_update_is_published_only_when_the_server_computes_with_it(tmp_path, tiny_model_dir, hot_swap):
    # Without a weight-update path the server was started on the run's serving/ folder: the folder
    # is where the run writes every update, so the old check (the server's root is the
    # checkpoint's path) passed forever after.
    with served_run(tmp_path, tiny_model_dir, allow_load=hot_swap) as (weights, backend):
        weights.start_training()  # publishes the base weights, which the server has: proved equal
        assert weights.fingerprint.distance < 1e-4 and weights.fingerprint.moved is None
        perturb(weights.trainer.model)
        if hot_swap:
            weights._publish()
            assert weights.fingerprint.distance < 1e-4 and backend.weights_id == weights.id
            assert weights.fingerprint.resolves(1e-3) and "not verified" not in weights.fingerprint.describe(1e-3)
        else:
            with pytest.raises(WeightsMismatch, match="does not serve the trainer's weights"):
                weights._publish()


def test_an_fp32_trainer_is_checked_against_a_bf16_server_in_the_servers_dtype(tmp_path, tiny_model_dir):
    # backend.vllm.dtype bfloat16 under model.dtype float32: rounded to the trainer's own dtype the
    # check took bf16 rounding for stale weights and stopped the run at its first publish.
    with served_run(tmp_path, tiny_model_dir, allow_load=True, dtype="bfloat16", served_dtype="bfloat16") as (w, _):
        w.start_training()
        assert w.fingerprint.distance < 1e-4
    with served_run(tmp_path / "fp32", tiny_model_dir, allow_load=True, dtype="bfloat16",
                    served_dtype="float32") as (w, _):
        with pytest.raises(WeightsMismatch, match="first check, on the weights the server started with"):
            w.start_training()


def test_the_served_fingerprint_is_the_local_one(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    srv = make_server(str(tiny_model_dir)).start()
    backend = OpenAIBackend(srv.base_url, str(tiny_model_dir), max_batch=2)
    try:
        tok = AutoTokenizer.from_pretrained(tiny_model_dir)
        probes = probe_ids(tok)
        served = backend.prompt_logprobs(probes)
        local = local_logprobs(AutoModelForCausalLM.from_pretrained(tiny_model_dir), probes)
        assert [len(s) for s in served] == [len(p) - 1 for p in probes]
        assert distance(served, local) < 1e-4
    finally:
        backend.close()
        srv.stop()


def test_an_update_smaller_than_the_tolerance_is_reported_unverified(tmp_path, tiny_model_dir):
    """The check's blind spot, stated instead of hidden: an update that moves the probes by less than
    the tolerance passes against a server that kept the old weights, so the run says so."""
    with served_run(tmp_path, tiny_model_dir, allow_load=False) as (weights, _):
        weights.start_training()
        perturb(weights.trainer.model, scale=1e-7)  # a 1e-7 learning rate's worth
        weights._publish()  # the stale server passes: the update is below what the probes resolve
        verdict = weights.fingerprint
        assert verdict.moved < 1e-3 and not verdict.resolves(1e-3)
        assert "this update is not verified" in verdict.describe(1e-3)


def test_a_bf16_server_is_checked_against_the_weights_rounded_to_bf16(tmp_path, tiny_model_dir):
    """A bf16 server holds the fp32 master weights rounded: against the masters it differs by that
    rounding (more than the tolerance, and more than a small update moves the probes), against the
    masters rounded alike by kernel numerics only; a stale bf16 server still stops the run."""
    from whale.rollout.fingerprint import Rounded

    with served_run(tmp_path, tiny_model_dir, allow_load=False, dtype="bfloat16") as (weights, backend):
        weights.start_training()
        assert weights.fingerprint.distance < 1e-4
        masters = weights.trainer.model
        assert next(masters.parameters()).dtype == torch.float32
        probes = probe_ids(weights.trainer.tokenizer)
        served = backend.prompt_logprobs(probes)
        assert distance(served, local_logprobs(masters, probes)) > 1e-3  # rounding, not staleness
        assert distance(served, local_logprobs(Rounded("bfloat16")(masters), probes)) < 1e-4
        perturb(masters)
        with pytest.raises(WeightsMismatch, match="does not serve the trainer's weights"):
            weights._publish()
