"""In-process transformers backend: our own batched sampling loop over a KV cache.

``model.generate`` cannot give every row its own stop strings, token limit, choice constraint
and random stream in one batch; this loop can, and it drops finished rows from the cache so
short turns do not pay for long ones.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicLayer

from whale.model import load_model, weights_id
from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling, stop_hit
from whale.rollout.backends.prefix_cache import Entry, PrefixCache

STOP_WINDOW = 24  # tokens decoded from the tail when looking for stop strings
# Finished rows leave the batch (a copy of the whole cache) only once the live rows are down to
# this share of it: at most log2(batch) copies per turn instead of one per finished row, for at
# most twice the decoding work on rows that are done.
COMPACT_AT = 0.5


def _cache(out):
    """The KV cache of a forward pass (transformers 5.24 renamed ``past_key_values`` to ``cache``)."""
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


class PreallocatedLayer(DynamicLayer):
    """A KV-cache layer that writes each token into a buffer sized for the whole turn.

    transformers' DynamicLayer concatenates a new [batch, heads, length, dim] tensor at every
    token, which makes decoding quadratic in the context: on 1000-token math episodes the copies
    took half the generation time. Here attention reads a view of the buffer's filled part.
    """

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = capacity, 0
        self._k = self._v = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.device, self.is_initialized = key_states.device, True
        end = self.length + key_states.shape[-2]
        if self._k is None or end > self._k.shape[-2]:
            self._grow(key_states, value_states, max(end, self.capacity, 2 * self.length))
        self._k[:, :, self.length:end] = key_states
        self._v[:, :, self.length:end] = value_states
        self.length = end
        self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
        return self.keys, self.values

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, size: int) -> None:
        b, h = key_states.shape[:2]
        k = key_states.new_empty(b, h, size, key_states.shape[-1])
        v = value_states.new_empty(b, h, size, value_states.shape[-1])
        if self.length:
            k[:, :, :self.length], v[:, :, :self.length] = self.keys, self.values
        self._k, self._v = k, v

    def preload(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Start from buffers whose first ``length`` positions already hold keys and values."""
        self.device, self.is_initialized = keys.device, True
        self._k, self._v, self.length = keys, values, length
        self.keys, self.values = keys[:, :, :length], values[:, :, :length]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.length:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[:, :, :self.length], self._v[:, :, :self.length]


class ChoiceConstraint:
    """Prefix-constrained decoding: the turn must spell one of ``choices`` then end (eos)."""

    def __init__(self, tokenizer, choices: list[str], eos_id: int):
        self.seqs = [tokenizer.encode(c, add_special_tokens=False) + [eos_id] for c in dict.fromkeys(choices)]

    def allowed(self, generated: list[int]) -> list[int]:
        n = len(generated)
        return sorted({s[n] for s in self.seqs if len(s) > n and s[:n] == generated})


def batches(lengths: list[int], max_batch: int, max_tokens: int) -> list[list[int]]:
    """Request indices in batches, shortest first: at most ``max_batch`` rows, and (``max_tokens``
    > 0) at most ``max_tokens`` cache positions, i.e. rows x the longest row's context plus new
    tokens, since every row's cache is as long as the longest. A row longer than the limit goes alone."""
    out: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        # shortest first, so the row joining a batch is its longest
        if out and len(out[-1]) < max_batch and (not max_tokens or (len(out[-1]) + 1) * lengths[i] <= max_tokens):
            out[-1].append(i)
        else:
            out.append([i])
    return out


@dataclass
class Timings:
    """Generation time in prefill forwards (reused keys copied in) and in decoding steps (sampling in)."""

    prefill_s: float = 0.0
    prefill_positions: int = 0  # rows x padded new tokens of every prefill
    decode_s: float = 0.0
    decode_steps: int = 0


class TransformersBackend(Backend):
    def __init__(self, model_dir: str, dtype: str = "float32", max_batch: int = 32, kv_reuse_mb: float = 0,
                 max_batch_tokens: int = 0):
        self.dtype, self.max_batch, self.max_batch_tokens = dtype, max_batch, max_batch_tokens
        self.prefix = PrefixCache(kv_reuse_mb)
        self.timings = Timings()
        self.load(model_dir)

    def release(self, sessions: list[str]) -> None:
        for s in sessions:
            self.prefix.release(s)

    def load(self, model_dir: str) -> str:
        served = weights_id(model_dir)  # first: a directory without weights must not keep the old id
        self.model, self.tokenizer = load_model(model_dir, self.dtype)
        if torch.cuda.is_available():
            self.model.to("cuda")
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self.weights_id = served
        self.model_dir = str(model_dir)
        self.context_len = int(getattr(self.model.config, "max_position_embeddings", 0) or 0) or None
        self.prefix.clear()
        return self.weights_id

    def serve_model(self, model, model_weights_id: str) -> None:
        """Serve an in-memory model (the trainer's, updated in place) under its weights id."""
        self.model, self.weights_id = model, model_weights_id
        self.prefix.clear()

    @torch.no_grad()
    def generate(self, requests: list[GenRequest], sampling: Sampling) -> list[GenResult]:
        was_training = self.model.training
        self.model.eval()
        out: list[GenResult | None] = [None] * len(requests)
        # the longest context bounds the batch: math turns after a long program output reach
        # thousands of tokens, and 32 rows of 4,400 positions were 6.4 GB of keys and values
        # Rows that reuse a past and rows that prefill everything go in separate batches: a batch
        # holding both lays out the longest reused past beside the longest full prompt, so every
        # row attends over both, and the reusing rows save nothing on the prefill.
        past = [self.prefix.lookup(r.session, r.ids, self.weights_id) if self.prefix.enabled else None
                for r in requests]
        for group in ([i for i, e in enumerate(past) if e], [i for i, e in enumerate(past) if not e]):
            lengths = [len(requests[i].ids) + requests[i].max_new_tokens for i in group]
            for chunk in batches(lengths, self.max_batch, self.max_batch_tokens):
                rows = [group[j] for j in chunk]
                results = self._batch([requests[i] for i in rows], [past[i] for i in rows], sampling)
                for i, res in zip(rows, results, strict=True):
                    # a finished row's new entry replaces its old one: let the old one go now, not
                    # after the last batch, or the cache's memory doubles during a call
                    out[i], past[i] = res, None
        if was_training:
            self.model.train()
        return out

    def _batch(self, reqs: list[GenRequest], past: list[Entry | None], sampling: Sampling) -> list[GenResult]:
        """One batch of requests; ``past``: each one's reused keys and values, or None."""
        start = time.perf_counter()
        done = [len(e.ids) if e else 0 for e in past]  # tokens whose keys and values are reused
        n, held, width = len(reqs), max(done), max(len(r.ids) - d for r, d in zip(reqs, done, strict=True))
        # Row layout: [pad | reused past] [pad | new tokens]; left padding in each part keeps every
        # row's reused tokens next to its new ones and its last token in the last column.
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((n, held + width), dtype=torch.long)
        pos = torch.zeros((n, width), dtype=torch.long)
        for i, (r, d) in enumerate(zip(reqs, done, strict=True)):
            new = r.ids[d:]
            ids[i, width - len(new):] = torch.tensor(new)
            attn[i, held - d:held] = 1
            attn[i, held + width - len(new):] = 1
            pos[i, width - len(new):] = torch.arange(d, len(r.ids))
        dev = self.model.device  # the trainer's device when it serves the trainer's model
        ids, attn, pos = ids.to(dev), attn.to(dev), pos.to(dev)
        capacity = held + width + max(r.max_new_tokens for r in reqs)
        cache = Cache(layers=[PreallocatedLayer(capacity) for _ in range(self.model.config.num_hidden_layers)])
        if held:
            self._preload(cache, past, done, held, capacity)
        # Only the last position's logits are needed: a full [batch, length, vocab] tensor is gigabytes.
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, cache=cache, use_cache=True,
                         logits_to_keep=1)
        cache, logits = _cache(out), out.logits[:, -1, :].float()
        prefilled = time.perf_counter()
        self.timings.prefill_s += prefilled - start
        self.timings.prefill_positions += n * width
        gens = [torch.Generator().manual_seed(r.seed) for r in reqs]
        constraints = [ChoiceConstraint(self.tokenizer, r.choices, self.eos_id) if r.choices else None for r in reqs]
        generated: list[list[int]] = [[] for _ in reqs]
        results: list[GenResult | None] = [None] * n
        rows = list(range(n))  # request index of each batch row (finished rows included)
        live = set(rows)
        last_pos = pos[:, -1]
        while True:
            active = [r for r, i in enumerate(rows) if i in live]
            nxt = self._sample(logits[active], sampling, [gens[rows[r]] for r in active],
                               [constraints[rows[r]] for r in active], [generated[rows[r]] for r in active])
            feed = [self.pad_id] * len(rows)  # a finished row decodes padding until the next compaction
            for r, tok in zip(active, nxt, strict=False):
                i = rows[r]
                generated[i].append(tok)
                feed[r] = tok
                finish = self._finish(reqs[i], generated[i], tok)
                if finish:
                    results[i] = GenResult(generated[i], finish)
                    live.discard(i)
                    if self.prefix.enabled and reqs[i].session:
                        self._keep(reqs[i], generated[i], cache, r, attn[r])
            if not live:
                break
            if len(live) <= len(rows) * COMPACT_AT:
                sel = torch.tensor([r for r, i in enumerate(rows) if i in live], device=dev)
                cache.batch_select_indices(sel)
                attn, last_pos = attn[sel], last_pos[sel]
                feed, rows = [feed[r] for r in sel.tolist()], [rows[r] for r in sel.tolist()]
            attn = torch.cat([attn, torch.ones((len(rows), 1), dtype=torch.long, device=dev)], dim=1)
            last_pos = last_pos + 1
            out = self.model(input_ids=torch.tensor(feed, device=dev).unsqueeze(1), attention_mask=attn,
                             position_ids=last_pos.unsqueeze(1), cache=cache, use_cache=True)
            cache, logits = _cache(out), out.logits[:, -1, :].float()
            self.timings.decode_steps += 1
        self.timings.decode_s += time.perf_counter() - prefilled
        return results

    def _preload(self, cache: Cache, past: list, done: list[int], held: int, capacity: int) -> None:
        """Fill the first ``held`` positions of every layer with each row's reused keys and values."""
        for layer_idx, layer in enumerate(cache.layers):
            ref = next(e for e in past if e).keys[layer_idx]
            heads, dim = ref.shape[0], ref.shape[-1]
            k = ref.new_zeros(len(past), heads, capacity, dim)
            v = ref.new_zeros(len(past), heads, capacity, dim)
            for i, (e, d) in enumerate(zip(past, done, strict=True)):
                if e:
                    k[i, :, held - d:held] = e.keys[layer_idx]
                    v[i, :, held - d:held] = e.values[layer_idx]
            layer.preload(k, v, held)

    def _keep(self, req: GenRequest, generated: list[int], cache: Cache, row: int, row_attn: torch.Tensor) -> None:
        """Store a finished row's keys and values: its context and every generated token but the
        last (sampled, never fed), i.e. the positions its attention mask marks."""
        where = row_attn.nonzero().squeeze(-1)
        tokens = req.ids + generated[:-1]
        if len(where) != len(tokens):  # the layout is not what this code assumes: store nothing
            self.prefix.release(req.session)
            return
        per_token = sum(2 * layer.keys.shape[1] * layer.keys.shape[-1] * layer.keys.element_size()
                        for layer in cache.layers)
        if not self.prefix.admits(req.session, per_token * len(tokens), self.weights_id):
            return
        keys = [layer.keys[row].index_select(1, where) for layer in cache.layers]
        values = [layer.values[row].index_select(1, where) for layer in cache.layers]
        self.prefix.put(req.session, Entry(tokens, keys, values, self.weights_id))

    def _finish(self, req: GenRequest, generated: list[int], tok: int) -> str | None:
        if tok == self.eos_id:
            return "eos"
        if req.stop and stop_hit(self.tokenizer.decode(generated[-STOP_WINDOW:]), req.stop):
            return "stop"
        if len(generated) >= req.max_new_tokens:
            return "length"
        return None

    def _sample(self, logits, sampling: Sampling, gens, constraints, generated) -> list[int]:
        """One token per row, sampled in one batched pass (top-k, top-p, temperature) then an
        inverse-CDF draw with each row's own generator, so a row's tokens do not depend on its
        batch neighbours' random draws.

        The vocabulary is cut to the top k where the logits are; only the k candidates per row go
        to the CPU, where the draw runs with per-request CPU generators (the same tokens on any
        device). Copying whole [rows, vocab] logits out every step cost more than the forward pass
        on a GPU."""
        for row, (constraint, gen) in enumerate(zip(constraints, generated, strict=False)):
            if constraint is not None:
                allowed = torch.tensor(constraint.allowed(gen), device=logits.device)
                keep = logits[row, allowed]
                logits[row] = float("-inf")
                logits[row, allowed] = keep
        if sampling.temperature <= 0:
            return logits.argmax(-1).tolist()
        if sampling.top_k and sampling.top_k > 0:
            vals, idx = torch.topk(logits, min(sampling.top_k, logits.shape[-1]), dim=-1)
        else:
            vals, idx = torch.sort(logits, dim=-1, descending=True)
        vals, idx = vals.cpu() / sampling.temperature, idx.cpu()
        probs = torch.softmax(vals, dim=-1)
        if sampling.top_p < 1.0:
            cut = probs.cumsum(-1) - probs > sampling.top_p
            probs = probs.masked_fill(cut, 0.0)
        cdf = probs.cumsum(-1)
        u = torch.stack([torch.rand(1, generator=g) for g in gens]) * cdf[:, -1:]
        pick = torch.searchsorted(cdf, u).clamp(max=cdf.shape[-1] - 1)
        return idx.gather(-1, pick).squeeze(-1).tolist()
