"""A stop asked for by a signal, kept until the run has ended.

SIGTERM unwinds the run as an exception (``whale.cli``), so that servers and temporary files are
cleaned up on the way out. An exception can be caught on its way, though: a library that catches
``BaseException`` around a callback, or a ``finally`` that raises anew, would let the run go on
and exit 0 as if nothing had been asked. The request is therefore also recorded here: the phases
check it between steps and iterations, and the command line exits non-zero whenever one was made.
"""
from __future__ import annotations

_requested: list[int] = []


def request_stop(signum: int) -> None:
    """Record that signal ``signum`` asked the run to stop (the first one is kept)."""
    _requested.append(signum)


def stop_requested() -> int | None:
    """The signal that asked the run to stop, or None."""
    return _requested[0] if _requested else None


def raise_if_stopped() -> None:
    """Unwind with the signal's exit status when a stop was asked for and not honoured yet."""
    signum = stop_requested()
    if signum is not None:
        raise SystemExit(128 + signum)


def clear() -> None:
    """Forget requests (a process that runs several commands, such as a test)."""
    _requested.clear()
