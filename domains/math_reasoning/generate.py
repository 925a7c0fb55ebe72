"""Synthetic integer-answer problems: easy with a short Python program, hard to do in one's head.

Every template draws its parameters from a seeded ``random.Random`` and computes the gold answer
here, in trusted code. Splits are drawn test first, then harness, then weight, each from its own
stream, and a problem already drawn for an earlier split is skipped: the held-out splits do not
move when the weight split grows, and no problem (same template and parameters, or same wording)
appears in two splits. Within a split the templates come in shuffled rounds, each template once
per round, so even a split of a few dozen covers them evenly. Independent draws can leave a
32-problem weight split with one or two problems of a template, and when those are the kinds the
model solves first, RSFT has almost nothing to accept.
"""
from __future__ import annotations

import math
import random
import re

from domains.base import check_sizes
from domains.tables import DRAW_ORDER
from whale.types import SPLITS, Example

# Held-out roles first so their content does not depend on the size of the weight split.


def _product(rng: random.Random):
    a, b = rng.randint(1000, 99999), rng.randint(100, 9999)
    wording = rng.choice([
        "What is {a} multiplied by {b}?",
        "Compute the product {a} * {b}.",
        "A warehouse holds {a} boxes with {b} screws in each box. How many screws are there in total?",
    ])
    return ("product", a, b), wording.format(a=a, b=b), a * b


def _sum_multiples(rng: random.Random):
    k, n = rng.randint(3, 29), rng.randint(200, 5000)
    wording = rng.choice([
        "What is the sum of all positive multiples of {k} that are less than {n}?",
        "Add up every positive integer below {n} that is divisible by {k}. What is the total?",
        "Find the sum of the positive integers smaller than {n} that are multiples of {k}.",
    ])
    return ("sum_multiples", k, n), wording.format(k=k, n=n), sum(range(k, n, k))


def _power_mod(rng: random.Random):
    b, e, m = rng.randint(2, 19), rng.randint(50, 999), rng.randint(7, 997)
    wording = rng.choice([
        "What is the remainder when {b}^{e} is divided by {m}?",
        "Compute {b}^{e} mod {m}.",
        "Find the value of {b} raised to the power {e}, taken modulo {m}.",
    ])
    return ("power_mod", b, e, m), wording.format(b=b, e=e, m=m), pow(b, e, m)


def _count_divisible(rng: random.Random):
    a, b = rng.sample(range(2, 30), 2)
    n = rng.randint(500, 20000)
    wording = rng.choice([
        "How many integers from 1 to {n} inclusive are divisible by {a} or by {b}?",
        "Count the integers between 1 and {n} (inclusive) that are multiples of {a} or of {b}.",
    ])
    lcm = a * b // math.gcd(a, b)
    answer = n // a + n // b - n // lcm
    return ("count_divisible", min(a, b), max(a, b), n), wording.format(a=a, b=b, n=n), answer


def _digit_sum_count(rng: random.Random):
    n, s = rng.randint(100, 9999), rng.randint(5, 20)
    wording = rng.choice([
        "How many integers from 1 to {n} inclusive have digits that add up to {s}?",
        "Count the positive integers not greater than {n} whose digit sum is {s}.",
    ])
    answer = sum(1 for i in range(1, n + 1) if sum(map(int, str(i))) == s)
    return ("digit_sum_count", n, s), wording.format(n=n, s=s), answer


def _sum_squares(rng: random.Random):
    lo = rng.randint(1, 200)
    hi = lo + rng.randint(20, 400)
    wording = rng.choice([
        "What is the sum of the squares of the integers from {lo} to {hi} inclusive?",
        "Compute {lo}^2 + {next}^2 + ... + {hi}^2.",
    ])
    answer = sum(i * i for i in range(lo, hi + 1))
    return ("sum_squares", lo, hi), wording.format(lo=lo, hi=hi, next=lo + 1), answer


def _factorial_mod(rng: random.Random):
    n, m = rng.randint(15, 200), rng.randint(1000, 99999)
    wording = rng.choice([
        "What is {n}! modulo {m}?",
        "Find the remainder when the factorial of {n} is divided by {m}.",
    ])
    return ("factorial_mod", n, m), wording.format(n=n, m=m), math.factorial(n) % m


def _count_primes(rng: random.Random):
    n = rng.randint(100, 5000)
    wording = rng.choice([
        "How many prime numbers are less than {n}?",
        "Count the primes p with p < {n}.",
    ])
    return ("count_primes", n), wording.format(n=n), _primes_below(n)


def _primes_below(n: int) -> int:
    sieve = bytearray([1]) * max(n, 2)
    sieve[0] = sieve[1] = 0
    for i in range(2, math.isqrt(max(n - 1, 0)) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
    return sum(sieve[:n])


TEMPLATES = (_product, _sum_multiples, _power_mod, _count_divisible, _digit_sum_count,
             _sum_squares, _factorial_mod, _count_primes)


def normalise(question: str) -> str:
    """The text key used to keep the splits disjoint (case, spacing and punctuation ignored)."""
    return re.sub(r"[^a-z0-9^*+!]+", " ", question.lower()).strip()


def generate(sizes: dict[str, int], seed: int) -> dict[str, list[Example]]:
    """Splits of ``sizes[split]`` examples each, disjoint, identical for the same seed."""
    check_sizes(sizes)
    seen: set = set()
    out = {}
    for split in DRAW_ORDER:
        if split in sizes:
            out[split] = _draw(split, sizes[split], seed, seen)
    return {split: out[split] for split in SPLITS if split in out}


def _draw(split: str, n: int, seed: int, seen: set) -> list[Example]:
    rng = random.Random(f"math_reasoning:{seed}:{split}")
    examples: list[Example] = []
    round_: list = []
    attempts = 0
    while len(examples) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise RuntimeError(f"could not draw {n} distinct problems for split {split!r}")
        if not round_:
            round_ = rng.sample(TEMPLATES, len(TEMPLATES))
        key, question, answer = round_[-1](rng)
        text_key = normalise(question)
        if key in seen or text_key in seen:
            continue  # the same template draws again: a repeat does not skew the round
        round_.pop()
        seen.update((key, text_key))
        examples.append(Example(id=f"math-{split}-{len(examples)}", split=split,
                                public={"question": question}, gold={"answer": answer}))
    return examples
