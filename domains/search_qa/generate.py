"""The synthetic search-QA data: a fictional encyclopaedia and questions about it.

The encyclopaedia is built as disjoint groups of entities, one per split plus a distractor group
nobody is asked about; entities only link inside their group, so the splits share no question,
no subject and no entity on any question's chain, while all of them search the same corpus.
Groups are built in the order test, harness, weight, distractor, each from its own
``random.Random``: the test split depends only on the seed and the test size.
"""
from __future__ import annotations

import random

from domains.base import check_sizes
from domains.search_qa.passages import world_passages
from domains.search_qa.questions import pick_questions
from domains.search_qa.world import NameMaker, build_world
from whale.types import SPLITS, Example

GROUP_ORDER = ("test", "harness", "weight", "distractor")
TWO_HOP_SHARE = 0.5


def build_encyclopaedia(sizes: dict[str, int], seed: int, two_hop_share: float = TWO_HOP_SHARE):
    """``(corpus, splits)``: corpus rows ``{"id", "contents": "title\\ntext"}`` and Examples per split."""
    check_sizes(sizes)
    used_words: set[str] = set()
    passages, questions = [], {}
    for group in GROUP_ORDER:
        if group != "distractor" and sizes.get(group, 0) == 0:
            questions[group] = []
            continue
        n = sizes[group] if group != "distractor" else max(8, sum(sizes.values()) // 4)
        rng = random.Random(f"search_qa:{seed}:{group}")
        world = build_world(group, n, rng, NameMaker(rng, used_words))
        passages += world_passages(world, rng)
        if group != "distractor":
            questions[group] = pick_questions(world, n, two_hop_share, rng)
    random.Random(f"search_qa:{seed}:corpus").shuffle(passages)
    corpus, fact_to_id = [], {}
    for i, p in enumerate(passages):
        pid = str(i + 1)
        corpus.append({"id": pid, "contents": f"{p['title']}\n{p['text']}"})
        for fact in p["facts"]:
            if fact in fact_to_id:
                raise AssertionError(f"fact {fact} tagged on two passages")
            fact_to_id[fact] = pid
    splits = {split: [_example(split, i, q, fact_to_id) for i, q in enumerate(questions[split])]
              for split in SPLITS if split in sizes}
    return corpus, splits


def _example(split: str, i: int, candidate: tuple, fact_to_id: dict[str, str]) -> Example:
    hops, question, answers, facts, chain = candidate
    gold = {"answers": answers, "hops": hops, "support": [fact_to_id[f] for f in facts], "chain": chain}
    return Example(id=f"search_qa-{split}-{i:04d}", split=split, public={"question": question}, gold=gold)
