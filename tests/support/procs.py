"""Watch processes from outside a jail: the proof that its caps hold is never taken from inside."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def count_marked(marker: str) -> int:
    """Live processes whose command line contains ``marker`` (read from the host's /proc)."""
    n = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text().splitlines()
            state = next((line for line in status if line.startswith("State")), "")
        except OSError:
            continue
        if marker in cmdline and "zombie" not in state:
            n += 1
    return n


class PeakWatcher:
    """Polls ``count_marked`` in a thread while a jail runs; ``peak`` is the most seen at once."""

    def __init__(self, marker: str, every_s: float = 0.02):
        self.marker, self.every_s, self.peak = marker, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, count_marked(self.marker))
            time.sleep(self.every_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def wait_until_none(marker: str, timeout_s: float = 5.0) -> int:
    """Processes still alive with ``marker`` after up to ``timeout_s`` (0 when all are gone)."""
    deadline = time.monotonic() + timeout_s
    while count_marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return count_marked(marker)


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out
