"""Rewards only the model can earn: the leak check and the authorship of tool output.

An episode's events are what entered it, in order, by author: ``env`` (an observation of the
trusted environment), ``model`` (text the model generated) and ``harness`` (messages, prefixes,
choices and tool arguments the harness wrote). The gold answer may reach the model only from the
environment or from the model itself: when the first event that mentions it is harness-written,
the rollout is scored 0 with verdict ``leak``. "First" matters: a harness that computes the
answer and tells it to the model is caught even though the model then repeats it; a harness that
echoes a tool output or the model's own words is not.

Tool output counts as harness-written when the tool ran what the harness wrote: the engine only
runs arguments the model wrote (``Environment.authored``), but a model can copy code or a query
from its prompt, so output whose arguments hold a piece the harness wrote first is the harness's
(``caused_by_harness``).
"""
from __future__ import annotations

from collections.abc import Callable

AUTHORS = ("env", "model", "harness")
# A copied piece: five characters with a digit in them ("37*41"), or sixteen of any kind.
SHORT_PIECE, LONG_PIECE = 5, 16
# Arguments are searched this far; longer code is still run, its tail is not searched.
MAX_SEARCHED = 4000


def leak(events: list[tuple[str, str]], mentions: Callable[[str], bool]) -> str | None:
    """Why the episode leaked the gold answer (None when it did not)."""
    author = first_author(events, mentions)
    if author == "harness":
        return "the gold answer appears in harness-written text before any observation or model output"
    return None


def first_author(events: list[tuple[str, str]], mentions: Callable[[str], bool]) -> str | None:
    """Who wrote the first event that ``mentions`` finds something in (None: nobody)."""
    for author, text in events:
        if mentions(text):
            return author
    return None


def caused_by_harness(values: list[str], events: list[tuple[str, str]]) -> str | None:
    """The first piece of ``values`` (tool arguments the model wrote) that the harness wrote before
    anyone else, or None. Pieces are windows of ``SHORT_PIECE`` characters holding a digit and of
    ``LONG_PIECE`` characters; the environment's and the model's earlier text are theirs to copy."""
    for value in values:
        text = value[:MAX_SEARCHED]
        seen: set[str] = set()
        for size in (SHORT_PIECE, LONG_PIECE):
            for i in range(len(text) - size + 1):
                piece = text[i:i + size]
                # a window that starts or ends in a blank is covered by its neighbours
                short = size == SHORT_PIECE
                if piece in seen or piece != piece.strip() or (short and not any(map(str.isdigit, piece))):
                    continue
                seen.add(piece)
                if first_author(events, lambda t, p=piece: p in t) == "harness":
                    return piece
    return None
