"""The transformers backend's own decoding loop against a cache-free reference."""
import pytest
import torch

from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import PreallocatedLayer, TransformersBackend, batches


@pytest.fixture(scope="module")
def varied_model_dir(tokenizer_dir, tmp_path_factory):
    """A tiny GQA Llama with large random weights, so greedy tokens vary from step to step."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, tie_word_embeddings=False, initializer_range=0.5)
    out = tmp_path_factory.mktemp("varied_model")
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def reference_greedy(model, ids: list[int], n: int, eos: int) -> list[int]:
    """Greedy decoding that recomputes the whole sequence at every token (no cache, no padding)."""
    out = []
    for _ in range(n):
        with torch.no_grad():
            tok = int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
        out.append(tok)
        if tok == eos:
            break
    return out


def test_batched_cached_greedy_equals_the_cache_free_reference(varied_model_dir, monkeypatch):
    writes = []
    update = PreallocatedLayer.update
    monkeypatch.setattr(PreallocatedLayer, "update",
                        lambda self, k, v, *a, **kw: writes.append(1) or update(self, k, v))
    backend = TransformersBackend(str(varied_model_dir), max_batch=8)
    tok = backend.tokenizer
    texts = ["The river flows", "Question: who founded the society in the old town by the sea?",
             "x", "Compute 12 * 7 and print it"]
    # different prompt lengths (left padding) and token limits (rows leave the batch at different steps)
    lengths = (40, 7, 25, 3)
    reqs = [GenRequest(tok.encode(t), n, seed=i, stop=[]) for i, (t, n) in enumerate(zip(texts, lengths, strict=True))]
    results = backend.generate(reqs, Sampling(temperature=0.0))
    for req, res in zip(reqs, results, strict=False):
        want = reference_greedy(backend.model, req.ids, req.max_new_tokens, backend.eos_id)
        assert res.ids == want
    assert len({tuple(r.ids[:3]) for r in results}) > 1  # the model is not degenerate
    assert len(writes) >= 2 * 40  # the loop decoded through the preallocated cache, every layer and step


def test_batches_hold_at_most_max_batch_rows_and_max_tokens_positions_shortest_first():
    lengths = [10, 50, 20, 30, 100]
    assert batches(lengths, 3, 0) == [[0, 2, 3], [1, 4]]
    # 3 rows x 30 positions fit in 90; 50 starts a batch (3 rows already); 2 x 100 > 90: 100 goes alone
    assert batches(lengths, 3, 90) == [[0, 2, 3], [1], [4]]
    assert batches(lengths, 8, 60) == [[0, 2], [3], [1], [4]]
    assert batches([], 4, 10) == []


def test_a_token_bounded_batch_gives_the_tokens_of_the_cache_free_reference(varied_model_dir, monkeypatch):
    backend = TransformersBackend(str(varied_model_dir), max_batch=8, max_batch_tokens=60)
    sizes = []
    run = backend._batch
    monkeypatch.setattr(backend, "_batch",
                        lambda reqs, past, sampling: sizes.append(len(reqs)) or run(reqs, past, sampling))
    tok = backend.tokenizer
    texts = ["The river flows", "Question: who founded the society in the old town by the sea?", "x", "Compute"]
    reqs = [GenRequest(tok.encode(t), 12, seed=i, stop=[]) for i, t in enumerate(texts)]
    results = backend.generate(reqs, Sampling(temperature=0.0))
    assert sorted(sizes) != [len(reqs)] and sum(sizes) == len(reqs)  # split by the token bound
    for req, res in zip(reqs, results, strict=True):
        assert res.ids == reference_greedy(backend.model, req.ids, req.max_new_tokens, backend.eos_id)


def test_preallocated_layer_grows_and_selects_rows():
    layer = PreallocatedLayer(capacity=3)
    k = torch.arange(2 * 1 * 2 * 2, dtype=torch.float32).reshape(2, 1, 2, 2)
    keys, values = layer.update(k, -k)
    assert layer.get_seq_length() == 2 and torch.equal(keys, k) and torch.equal(values, -k)
    step = torch.full((2, 1, 2, 2), 9.0)  # past capacity: the buffer grows, the old tokens stay
    keys, _ = layer.update(step, step)
    assert keys.shape == (2, 1, 4, 2) and torch.equal(keys[:, :, :2], k) and torch.equal(keys[:, :, 2:], step)
    layer.batch_select_indices(torch.tensor([1]))
    assert torch.equal(layer.keys, torch.cat([k, step], dim=2)[1:]) and layer.get_seq_length() == 4


def test_cross_turn_kv_reuse_gives_the_tokens_of_a_full_prefill(varied_model_dir):
    """Multi-turn episodes through the engine: keeping each episode's keys and values between turns
    (the next turn prefills only its new tokens) produces exactly the re-prefill path's tokens."""
    from tests.toy_domain import ECHO_HARNESS, ToyDomain
    from whale.rollout.engine import Engine

    runs, timings = {}, {}
    for budget_mb in (0, 64):
        backend = TransformersBackend(str(varied_model_dir), max_batch=8, kv_reuse_mb=budget_mb)
        engine = Engine(backend, ToyDomain(n=4), Sampling(temperature=1.0, top_p=1.0, top_k=0))
        runs[budget_mb] = [(r.token_ids, r.mask) for r in engine.run(ECHO_HARNESS, ToyDomain(n=4).items, k=2,
                                                                     seed=3, progress=False)]
        timings[budget_mb] = backend.timings
        stats = backend.prefix
        if budget_mb:
            # every turn after an episode's first reused its past; ended episodes were released
            assert stats.hits > 0 and stats.reused_tokens > 0 and not stats.entries and stats.used == 0
        else:
            assert stats.hits == 0 and not stats.entries
    assert runs[64] == runs[0]
    # the same decoding steps; the reusing turns prefilled only their new tokens
    assert timings[64].decode_steps == timings[0].decode_steps > 0
    assert 0 < timings[64].prefill_positions < timings[0].prefill_positions
    assert max(len(ids) for ids, _ in runs[0]) > 40  # several turns of context


def test_kv_reuse_past_its_budget_with_an_example_passed_twice(varied_model_dir, monkeypatch):
    """A budget that refuses some entries, and every example passed twice: each episode has its
    own session (a shared one would hand one copy's keys to the other), and the tokens are still
    those of the re-prefill path."""
    from tests.toy_domain import ECHO_HARNESS, ToyDomain
    from whale.rollout.engine import Engine

    items = ToyDomain(n=4).items * 2
    runs, sessions = {}, []
    for budget_mb in (0, 0.1):
        backend = TransformersBackend(str(varied_model_dir), max_batch=3, kv_reuse_mb=budget_mb)
        monkeypatch.setattr(backend, "generate", lambda reqs, sampling, generate=backend.generate:
                            sessions.append([r.session for r in reqs]) or generate(reqs, sampling))
        engine = Engine(backend, ToyDomain(n=4), Sampling(temperature=1.0, top_p=1.0, top_k=0))
        runs[budget_mb] = [(r.token_ids, r.mask) for r in engine.run(ECHO_HARNESS, items, k=1, seed=3,
                                                                     progress=False)]
        if budget_mb:
            assert backend.prefix.refused > 0 and backend.prefix.hits > 0
    assert runs[0.1] == runs[0]
    assert runs[0][:4] == runs[0][4:]  # the copies are the same episodes (same seeds)
    assert all(len(set(turn)) == len(turn) for turn in sessions) and len(sessions[0]) == 8


def test_rows_that_reuse_a_past_are_batched_apart_from_rows_that_prefill(varied_model_dir, monkeypatch):
    """Only some episodes keep their past (here: every other session), so a turn holds both kinds
    of rows; each batch holds one kind, and the tokens are still those of the re-prefill path."""
    from tests.toy_domain import ECHO_HARNESS, ToyDomain
    from whale.rollout.engine import Engine

    def run(budget_mb, record=None):
        backend = TransformersBackend(str(varied_model_dir), max_batch=8, kv_reuse_mb=budget_mb)
        if record is not None:
            put, batch = backend.prefix.put, backend._batch
            seen: list[str] = []

            def put_some(session, entry):
                if session not in seen:
                    seen.append(session)
                if seen.index(session) % 2 == 0:
                    put(session, entry)

            def recorded(reqs, past, sampling):
                record.append({entry is not None for entry in past})
                return batch(reqs, past, sampling)

            monkeypatch.setattr(backend.prefix, "put", put_some)
            monkeypatch.setattr(backend, "_batch", recorded)
        engine = Engine(backend, ToyDomain(n=4), Sampling(temperature=1.0, top_p=1.0, top_k=0))
        return [(r.token_ids, r.mask) for r in engine.run(ECHO_HARNESS, ToyDomain(n=4).items, k=2, seed=3,
                                                          progress=False)]

    record: list[set] = []
    assert run(64, record) == run(0)
    assert all(len(kinds) == 1 for kinds in record), record
    assert {True} in record and {False} in record[1:]  # later turns had both kinds, batched apart


def test_prefix_cache_checks_the_prefix_and_weights_and_refuses_past_its_budget():
    from whale.rollout.backends.prefix_cache import Entry, PrefixCache

    def entry(ids, wid="w"):
        kv = [torch.zeros(2, len(ids), 4)]  # 32 bytes per token
        return Entry(list(ids), kv, [t.clone() for t in kv], wid)

    cache = PrefixCache(budget_mb=(2 * 32 * 10) / 2**20)  # room for 10 tokens
    cache.put("a", entry([1, 2, 3]))
    assert cache.lookup("a", [1, 2, 3, 4], "w").ids == [1, 2, 3]
    # the same context again (a retried turn): all but its last token, which must be prefilled
    cut = cache.lookup("a", [1, 2, 3], "w")
    assert cut.ids == [1, 2] and cut.keys[0].shape == (2, 2, 4)
    assert cache.lookup("a", [1, 2, 7, 8], "w").ids == [1, 2]  # went on differently: the shared part
    assert cache.lookup("a", [1, 9, 3, 4], "w") is None  # shares less than half of the new context
    assert cache.lookup("a", [1, 2, 3, 4], "other weights") is None
    assert cache.entries["a"].ids == [1, 2, 3]  # a cut reuse leaves the stored entry whole
    cache.put("b", entry(range(5)))
    cache.put("c", entry(range(4)))  # over the budget: "c" is refused, what is held stays
    assert set(cache.entries) == {"a", "b"} and cache.refused == 1 and cache.used == 2 * 32 * 8
    cache.put("huge", entry(range(11)))  # larger than the whole budget: not kept
    assert "huge" not in cache.entries and cache.refused == 2
    # asked before the keys and values are copied out: a refusal needs no entry at all
    assert not cache.admits("e", 2 * 32 * 8, "w") and cache.refused == 3 and "e" not in cache.entries
    cache.release("b")
    assert set(cache.entries) == {"a"} and cache.used == 2 * 32 * 3
    cache.put("d", entry(range(9), wid="new"))  # entries under other weights can never hit: they go first
    assert set(cache.entries) == {"d"} and cache.evicted == 1 and cache.used == 2 * 32 * 9


def test_prefix_cache_hits_on_the_engines_cyclic_turns_past_its_budget():
    """Six episodes visited in the same order every turn, each growing one token a turn, in room
    for ten tokens. Least-recently-used eviction would miss on every lookup (each entry is evicted
    just before its episode comes round again); keeping what is held hits 3, then 2 times."""
    from whale.rollout.backends.prefix_cache import Entry, PrefixCache

    cache = PrefixCache(budget_mb=(2 * 32 * 10) / 2**20)
    hits = []
    for turn in range(3):
        before = cache.hits
        for session in range(6):
            ids = [session] * (3 + turn)
            cache.lookup(str(session), ids + [0], "w")
            kv = [torch.zeros(2, len(ids), 4)]
            cache.put(str(session), Entry(ids, kv, [t.clone() for t in kv], "w"))
        hits.append(cache.hits - before)
    assert hits == [0, 3, 2] and cache.used <= cache.budget


def test_blind_null_policy_turns_reuse_the_keys_and_values_of_their_donors_context(varied_model_dir):
    """A blind turn answers from another episode's context, which grows turn by turn: its own
    session keeps what it prefilled, and the next turn reuses the part the donor's context still
    starts with. Reuse changes the cost, not the tokens."""
    from tests.toy_domain import ECHO_HARNESS, ToyDomain
    from whale.rollout.backends.blind import BlindBackend
    from whale.rollout.engine import Engine

    def run(budget_mb):
        backend = TransformersBackend(str(varied_model_dir), max_batch=8, kv_reuse_mb=budget_mb)
        engine = Engine(BlindBackend(backend), ToyDomain(n=4), Sampling(temperature=1.0, top_p=1.0, top_k=0))
        rollouts = engine.run(ECHO_HARNESS, ToyDomain(n=4).items, k=2, seed=3, progress=False)
        return [(r.token_ids, r.mask) for r in rollouts], backend.prefix

    cached, prefix = run(64)
    assert prefix.hits > 0 and prefix.reused_tokens > 0
    assert not prefix.entries  # every blind session was released with its episode
    assert cached == run(0)[0]
