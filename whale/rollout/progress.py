"""Progress of one engine call, on a terminal and in a log file alike.

On a terminal a tqdm bar redraws in place. In a log file (nohup, CI, a Prefect worker) a bar would
be noise between log lines and tqdm's own default shows nothing at all, so a test evaluation of
several minutes was silent; there a plain line is written at most every ``every_s`` seconds, and
a last one when the call ends if any was written and it is not the last state already.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

EVERY_S = 60.0


class Progress:
    """Counts finished episodes of ``total``; ``update`` is called between the engine's turns."""

    def __init__(self, total: int, desc: str, enabled: bool = True, stream: TextIO | None = None,
                 every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.every_s, self.clock = total, desc, every_s, clock
        self.stream = stream or sys.stderr
        self.done = self.turn = self.lines = 0
        self.shown: tuple[int, int] | None = None  # (done, turns) of the last line written
        self.started = self.last = clock()
        tty = enabled and _isatty(self.stream)
        self.bar = tqdm(total=total, desc=desc, leave=False, file=self.stream) if tty else None
        self.plain = enabled and not tty

    def update(self, done: int, turns: int) -> None:
        """``done`` episodes have finished after ``turns`` turns of generation."""
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done, self.turn = done, turns
        if self.plain and self.clock() - self.last >= self.every_s:
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.plain and self.lines and self.shown != (self.done, self.turn):
            self._line()

    def _line(self) -> None:
        now = self.clock()
        self.last, self.lines, self.shown = now, self.lines + 1, (self.done, self.turn)
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"{stamp} | INFO    | whale - {self.desc}: {self.done}/{self.total} episodes finished "
                          f"after {self.turn} turn(s), {(now - self.started) / 60:.1f} min\n")
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a terminal
        return False
