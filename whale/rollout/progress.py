"""Progress of one engine call, on a terminal and in a log file alike.

On a terminal a tqdm bar redraws in place. In a log file (nohup, CI, a Prefect worker) a bar would
be noise between log lines and tqdm's own default shows nothing at all, so a test evaluation of
several minutes was silent; there a plain line is written at most every ``every_s`` seconds, and
a last one when the call ends if any was written and it is not the last state already. One turn
of a large batch can itself take many minutes (the first turn of 64 math episodes on 2 cores took
25), so while a turn generates, a background thread keeps writing a line every ``every_s``.
"""
from __future__ import annotations

import sys
import threading
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
        # The heartbeat thread is the only writer while a turn runs: update, close and the next
        # turn join it first, so lines are never written from two threads at once.
        self.live = 0  # episodes of the turn being generated, 0 between turns
        self.beat: tuple[threading.Thread, threading.Event] | None = None

    def generating(self, live: int) -> None:
        """A turn of ``live`` episodes starts; it ends at the next ``update`` or ``close``."""
        self._end_turn()
        self.live = live
        if self.plain:
            stop = threading.Event()
            self.beat = (threading.Thread(target=self._heartbeat, args=(stop,), daemon=True), stop)
            self.beat[0].start()

    def update(self, done: int, turns: int) -> None:
        """``done`` episodes have finished after ``turns`` turns of generation."""
        self._end_turn()
        if self.bar is not None:
            self.bar.update(done - self.done)
        self.done, self.turn = done, turns
        if self.plain and self.clock() - self.last >= self.every_s:
            self._line()

    def close(self) -> None:
        self._end_turn()
        if self.bar is not None:
            self.bar.close()
        if self.plain and self.lines and self.shown != (self.done, self.turn):
            self._line()

    def _end_turn(self) -> None:
        # the heartbeat stops before the turn's state is cleared, so it never writes a half-updated line
        if self.beat is not None:
            thread, stop = self.beat
            stop.set()
            thread.join()
            self.beat = None
        self.live = 0

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            if self.clock() - self.last >= self.every_s:
                self._line()

    def _line(self) -> None:
        now = self.clock()
        self.last, self.lines = now, self.lines + 1
        turn = f", turn {self.turn + 1} generating for {self.live} episode(s)" if self.live else ""
        self.shown = None if self.live else (self.done, self.turn)
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"{stamp} | INFO    | whale - {self.desc}: {self.done}/{self.total} episodes "
                          f"finished after {self.turn} turn(s){turn}, {(now - self.started) / 60:.1f} min\n")
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a terminal
        return False
