"""The OpenAI-compatible backend against `whale serve` on loopback, checked against the in-process backend."""
from __future__ import annotations

import httpx
import pytest

from tests.support.backends import chat_requests, perturbed, same
from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.model import weights_id
from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.backends.openai import OpenAIBackend
from whale.rollout.engine import Engine
from whale.rollout.serve import make_server

GREEDY = Sampling(temperature=0.0)
SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=20)
CHOICES = ["alpha", "beta gamma", "delta"]


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model re-drawn with untied, wide random weights.

    The shared fixture ties its small random embeddings, so greedy decoding just repeats the last
    prompt token whatever the prompt; these weights give prompt-dependent output with clear argmax
    margins, so the equality checks below compare something.
    """
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.tie_word_embeddings, config.initializer_range = False, 1.0
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("sharp_model")
    LlamaForCausalLM(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server(model_dir):
    # a wide window so one test's concurrent requests land in one batch even on a busy machine
    srv = make_server(str(model_dir), max_batch=8, window_s=0.1).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def remote(server, model_dir):
    backend = OpenAIBackend(server.base_url, str(model_dir), max_batch=8)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def local(model_dir):
    return TransformersBackend(str(model_dir), max_batch=8)


@pytest.fixture(scope="module")
def other_dir(model_dir, tmp_path_factory):
    return perturbed(model_dir, tmp_path_factory.mktemp("perturbed"))


@pytest.fixture(scope="module")
def requests(tokenizer):
    return chat_requests(tokenizer)


def test_greedy_matches_in_process_and_is_batched(server, remote, local, requests):
    calls = server.batcher.calls
    out = remote.generate(requests, GREEDY)
    assert server.batcher.calls - calls < len(requests)  # concurrent arrivals shared a batch
    assert same(out, local.generate(requests, GREEDY))
    for req, res in zip(requests, out, strict=False):
        assert res.finish in ("eos", "length") and 0 < len(res.ids) <= req.max_new_tokens


def test_seeded_sampling_is_per_request(remote, local, requests):
    first, again = remote.generate(requests, SAMPLED), remote.generate(requests, SAMPLED)
    assert same(first, again) and same(first, local.generate(requests, SAMPLED))
    reseeded = [GenRequest(r.ids, r.max_new_tokens, r.seed + 1) for r in requests]
    assert not same(first, remote.generate(reseeded, SAMPLED))


def test_stop_string_and_token_limit(remote, local, requests, tokenizer):
    base = GenRequest(requests[1].ids, 16, seed=1)
    free = remote.generate([base], GREEDY)[0]
    assert free.finish == "length" and len(free.ids) == 16  # the token limit holds exactly
    # a stop string the model writes first at token `at` of its free-running answer
    at, stop = next((j, p) for j in range(2, 16) if (p := tokenizer.decode(free.ids[j:j + 1]).strip())
                    and "\ufffd" not in p and p not in tokenizer.decode(free.ids[:j]))
    req = GenRequest(base.ids, 16, seed=1, stop=[stop])
    res = remote.generate([req], GREEDY)[0]
    assert res.finish == "stop" and res.ids == free.ids[:at + 1]
    assert stop in tokenizer.decode(res.ids) and stop not in tokenizer.decode(res.ids[:-1])
    assert same([res], local.generate([req], GREEDY))


def test_choice_constraint(remote, local, requests, tokenizer):
    reqs = [GenRequest(r.ids, 8, seed=r.seed, choices=CHOICES) for r in requests]
    out = remote.generate(reqs, SAMPLED)
    for res in out:
        assert res.finish == "eos" and res.ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(res.ids, skip_special_tokens=True) in CHOICES
        assert res.ids[:-1] == tokenizer.encode(tokenizer.decode(res.ids[:-1]), add_special_tokens=False)
    assert same(out, local.generate(reqs, SAMPLED))


def test_server_accepts_both_choice_forms_and_reports_vllm_fields(server, requests):
    ids = requests[0].ids
    for extra in ({"structured_outputs": {"choice": CHOICES}}, {"guided_choice": CHOICES}):
        body = {"prompt": ids, "max_tokens": 8, "temperature": 0, "return_token_ids": True, **extra}
        choice = httpx.post(f"{server.base_url}/completions", json=body).json()["choices"][0]
        assert choice["text"] in CHOICES and choice["finish_reason"] == "stop" and choice["stop_reason"] is None
        assert choice["prompt_token_ids"] == ids and choice["token_ids"][-1] == 2


def test_chat_completions_over_http(server):
    # the `openai` client is not installed here; httpx speaks the same wire format
    body = {"messages": [{"role": "user", "content": "pick one"}], "max_tokens": 4, "seed": 3,
            "structured_outputs": {"choice": CHOICES}}
    reply = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert reply.status_code == 200
    out = reply.json()
    assert out["object"] == "chat.completion" and out["usage"]["completion_tokens"] >= 2
    assert out["choices"][0]["message"] == {"role": "assistant", "content": out["choices"][0]["message"]["content"]}
    assert out["choices"][0]["message"]["content"] in CHOICES
    plain = httpx.post(f"{server.base_url}/chat/completions", json={**body, "structured_outputs": None}).json()
    assert plain["choices"][0]["finish_reason"] == "length" and plain["usage"]["completion_tokens"] == 4


def test_bad_requests_get_clear_errors(server):
    url = f"{server.base_url}/completions"
    bad = httpx.post(url, json={"prompt": [10**9], "max_tokens": 2})
    assert bad.status_code == 400 and "token-id prompt" in bad.json()["error"]["message"]
    assert httpx.post(url, json={"prompt": [1, 2], "stream": True}).status_code == 400
    assert httpx.post(url, json={"prompt": [1, 2], "max_tokens": 10**6}).status_code == 400
    assert httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}).status_code == 400
    assert httpx.get(f"{server.base_url}/nothing").status_code == 404


def test_weights_id_and_hot_swap(model_dir, other_dir, requests):
    srv = make_server(str(model_dir), max_batch=8, allow_load=True, load_roots=[other_dir]).start()
    try:
        old = weights_id(model_dir)
        models = httpx.get(f"{srv.base_url}/models")
        assert models.json()["data"][0]["weights_id"] == old == models.headers["x-whale-weights-id"]
        backend = OpenAIBackend(srv.base_url, str(model_dir), max_batch=4)
        bystander = OpenAIBackend(srv.base_url, str(model_dir), max_batch=4)
        before = backend.generate(requests, GREEDY)
        new = backend.load(str(other_dir))
        assert new == weights_id(other_dir) != old
        backend.check_serving(new)
        with pytest.raises(RuntimeError, match="stale"):
            backend.check_serving(old)
        after = backend.generate(requests, GREEDY)
        assert not same(before, after) and same(after, TransformersBackend(str(other_dir)).generate(requests, GREEDY))
        with pytest.raises(RuntimeError, match="expected " + old):  # a client that missed the swap
            bystander.generate(requests[:1], GREEDY)
    finally:
        srv.stop()


def test_server_without_load_asks_for_a_restart(model_dir, other_dir):
    srv = make_server(str(model_dir), allow_load=False).start()
    try:
        backend = OpenAIBackend(srv.base_url, str(model_dir), max_batch=2)
        assert backend.load(str(model_dir)) == weights_id(model_dir)  # already serving it
        with pytest.raises(RuntimeError, match="restart the server"):
            backend.load(str(other_dir))
    finally:
        srv.stop()


def test_engine_over_http_matches_in_process(remote, local):
    domain = ToyDomain(n=3)
    examples = domain.examples("test")
    over_http = Engine(remote, domain, GREEDY).run(ECHO_HARNESS, examples, k=2, seed=0, progress=False)
    in_process = Engine(local, domain, GREEDY).run(ECHO_HARNESS, examples, k=2, seed=0, progress=False)
    assert len(over_http) == 6
    for r, ref in zip(over_http, in_process, strict=False):
        assert r.error is None and r.stop_reason in ("answered", "truncated", "turn_cap")
        assert len(r.token_ids) == len(r.mask) and r.tokens_out == sum(r.mask) > 0
        assert r.weights_id == remote.weights_id and 1 <= r.turns <= 3
        assert (r.token_ids, r.mask, r.stop_reason) == (ref.token_ids, ref.mask, ref.stop_reason)
