"""Forms of a gold answer that a harness could write instead of the answer itself.

The leak check (``domains/leaks.py``) must recognise the answer however the harness spells
it, as long as the model could turn it back into the answer or the verifier would accept it as
the answer: spaced or separated characters, reversed, spelled out in words, Roman numerals,
hexadecimal, ROT13 and base64. The list is long but not exhaustive (an arithmetic hint such as
"1500 + 17" is not a form of 1517); docs/security.md says what it covers.
"""
from __future__ import annotations

import base64
import codecs
import re

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
# What may stand between two characters of a separated form ("1 5 1 7", "p-a-r-i-s", "1\n5\n1\n7").
SEPARATOR = r"[\W_]{1,3}"


def spelled(n: int) -> str:
    """An integer in English words, without "and" or hyphens: 1517 -> "one thousand five hundred
    seventeen". Compare it against ``word_text`` of a text."""
    if n < 0:
        return "minus " + spelled(-n)
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        return ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + spelled(n % 100))
    for size, name in SCALES:
        if n >= size:
            rest = n % size
            return spelled(n // size) + " " + name + ("" if rest == 0 else " " + spelled(rest))
    raise AssertionError("unreachable")


def digit_words(n: int) -> str:
    """The digits of ``|n|`` as words: 1517 -> "one five one seven"."""
    return " ".join(ONES[int(d)] for d in str(abs(n)))


def roman(n: int) -> str | None:
    """A Roman numeral for 1..3999, else None."""
    if not 0 < n < 4000:
        return None
    out = ""
    for value, letters in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out, n = out + letters, n - value
    return out


def word_text(text: str) -> str:
    """Lower-case words of a text with hyphens as spaces and "and" dropped, for spelled forms."""
    words = re.findall(r"[a-z]+", text.lower().replace("-", " "))
    return " " + " ".join(w for w in words if w != "and") + " "


def separated(chars: str) -> re.Pattern:
    """Every character of ``chars`` in order with one to three separators between each two."""
    return re.compile(SEPARATOR.join(re.escape(c) for c in chars), re.I)


def rot13(s: str) -> str:
    return codecs.encode(s, "rot13")


def base64_patterns(s: str) -> list[re.Pattern]:
    """``s`` in base64, with and without its padding, not inside a longer base64 run."""
    coded = base64.b64encode(s.encode()).decode()
    forms = {coded, coded.rstrip("=")}
    return [re.compile(r"(?<![A-Za-z0-9+/])" + re.escape(f) + r"(?![A-Za-z0-9+/=])") for f in forms]
