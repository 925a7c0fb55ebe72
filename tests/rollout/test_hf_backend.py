"""The transformers backend's own decoding loop against a cache-free reference."""
import pytest
import torch

from whale.rollout.backends.base import GenRequest, Sampling
from whale.rollout.backends.hf import PreallocatedLayer, TransformersBackend


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
