"""Rewards only the model can earn: the leak check on a finished episode's events.

An episode's events are what entered it, in order, by author: ``env`` (an observation of the
trusted environment), ``model`` (text the model generated) and ``harness`` (messages, prefixes and
tool arguments the harness wrote). The gold answer may reach the model only from the environment
or from the model itself: when the first event that mentions it is harness-written, the rollout
is scored 0 with verdict ``leak``. "First" matters: a harness that computes the answer and tells
it to the model is caught even though the model then repeats it; a harness that echoes a tool
output or the model's own words is not.
"""
from __future__ import annotations

from collections.abc import Callable

AUTHORS = ("env", "model", "harness")


def leak(events: list[tuple[str, str]], mentions: Callable[[str], bool]) -> str | None:
    """Why the episode leaked the gold answer (None when it did not)."""
    for author, text in events:
        if mentions(text):
            if author == "harness":
                return "the gold answer appears in harness-written text before any observation or model output"
            return None
    return None
