"""Progress of an engine call: a log file gets plain timed lines, a terminal a bar, nothing when off."""
from __future__ import annotations

import io
import time

from whale.rollout.progress import Progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_file_gets_a_line_per_interval_and_a_last_one():
    stream, clock = io.StringIO(), Clock()
    p = Progress(256, "test c0-start", stream=stream, every_s=60, clock=clock)
    p.update(0, 0)
    clock.now = 30
    p.update(0, 1)  # within the interval: nothing yet
    assert stream.getvalue() == ""
    clock.now = 90
    p.update(40, 2)
    clock.now = 100
    p.update(256, 3)  # 10 s after the last line: not yet
    p.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in stream.getvalue()
    assert lines[0].endswith("whale - test c0-start: 40/256 episodes finished after 2 turn(s), 1.5 min")
    assert lines[1].endswith("whale - test c0-start: 256/256 episodes finished after 3 turn(s), 1.7 min")


def test_the_last_state_is_not_written_twice():
    stream, clock = io.StringIO(), Clock()
    p = Progress(8, "eval", stream=stream, every_s=60, clock=clock)
    clock.now = 61
    p.update(8, 2)  # the interval is up at the last turn: the line already says where the call ended
    p.close()
    assert len(stream.getvalue().splitlines()) == 1


def test_a_short_call_in_a_log_file_writes_nothing():
    stream, clock = io.StringIO(), Clock()
    p = Progress(16, "rsft step 0", stream=stream, every_s=60, clock=clock)
    clock.now = 59
    p.update(16, 2)
    p.close()
    assert stream.getvalue() == ""


def test_terminal_gets_a_bar_and_disabled_gets_nothing():
    tty = Terminal()
    p = Progress(4, "harness c1-i2", stream=tty, every_s=0)
    p.update(2, 1)
    p.update(4, 2)
    p.close()
    assert "harness c1-i2" in tty.getvalue() and "episodes finished" not in tty.getvalue()
    quiet = io.StringIO()
    p = Progress(4, "x", enabled=False, stream=quiet, every_s=0)
    p.update(4, 1)
    p.close()
    assert quiet.getvalue() == ""


def test_a_long_turn_in_a_log_file_writes_lines_while_it_generates():
    stream = io.StringIO()
    p = Progress(64, "test c0-start", stream=stream, every_s=0.05)
    p.update(0, 0)
    p.generating(64)
    deadline = time.monotonic() + 10
    while "generating" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.update(10, 1)  # the turn ended: its heartbeat stops
    written = len(stream.getvalue().splitlines())
    time.sleep(0.2)
    p.close()
    lines = stream.getvalue().splitlines()
    assert "test c0-start: 0/64 episodes finished after 0 turn(s), turn 1 generating for 64 episode(s)" in lines[0]
    assert all("generating" not in line for line in lines[written:])
    assert lines[-1].split(" - ")[1].startswith("test c0-start: 10/64 episodes finished after 1 turn(s), ")
    assert p.beat is None
