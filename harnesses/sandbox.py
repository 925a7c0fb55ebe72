"""Run untrusted harness code in a jailed worker process.

The boundary is the OS jail (``harnesses/jail.py``: bubblewrap, an unprivileged uid, its own pid
and network namespaces, no view of the project, a process cap) plus the limits the worker sets
on itself (CPU time, address space, file size). In front of it, as friendly early errors, a
static check of the source and, in the worker, restricted builtins and an import allow-list.
Replies come as length-prefixed frames on a pipe of their own, within a wall-clock limit per
batch of hook calls and a size limit per reply; the engine re-checks and clamps what they say.
Anything that goes wrong becomes a ``SandboxError`` (the whole harness is broken) or a failed
hook result (one episode is broken); neither can stop the caller.
"""
from __future__ import annotations

import ast
import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harnesses._worker import ALLOWED_MODULES, FORBIDDEN_BUILTINS, HEADER
from harnesses.jail import Jailed, JailSpec, python_binary

HERE = Path(__file__).resolve().parent
BOX_FILES = {"_worker.py": HERE / "_worker.py", "harnesses/__init__.py": HERE / "__init__.py",
             "harnesses/contract.py": HERE / "contract.py"}


@dataclass
class Limits:
    cpu_s: int = 60
    memory_mb: int = 1024
    hook_timeout_s: float = 10.0
    hook_s_per_episode: float = 2.0
    output_kb: int = 4096
    jail: str = "bwrap"
    max_processes: int = 32


class SandboxError(RuntimeError):
    """The harness as a whole cannot run (bad source, crash, hang, limit exceeded)."""


def static_violations(source: str) -> list[str]:
    """Rule breaks visible in the source, each with its line number (empty list = clean)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"line {e.lineno}: syntax error: {e.msg}"]
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        else:
            names = []
        found += [f"line {line}: import of {n!r} is not allowed" for n in names if n not in ALLOWED_MODULES]
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__"):
            found.append(f"line {line}: dunder attribute {node.attr!r} is not allowed")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            found.append(f"line {line}: {node.id!r} is not available in a harness")
    if not any(isinstance(n, ast.ClassDef) and n.name == "Harness" for n in tree.body):
        found.append("line 1: the module must define `class Harness(BaseHarness)`")
    return found


class HarnessSandbox:
    """One jailed worker hosting a harness; ``calls`` runs hooks for many episodes at once."""

    def __init__(self, source: str, limits: Limits | None = None, static_check: bool = True):
        self.limits = limits or Limits()
        self.hook_budget_s, self.hook_s = float("inf"), 0.0
        bad = static_violations(source) if static_check else []
        if bad:
            raise SandboxError("static check failed:\n" + "\n".join(bad))
        lim = self.limits
        spec = JailSpec(lim.jail, lim.max_processes)
        address_space = spec.address_space_mb(lim.memory_mb)  # before anything is opened
        self._log = tempfile.TemporaryFile(prefix="whale-harness-")
        self._replies, reply_end = os.pipe()
        argv = [python_binary(), "-I", "-S", "{box}/_worker.py", "{box}", str(reply_end), str(lim.cpu_s),
                str(address_space), str(lim.max_processes)]
        try:
            self.jail = Jailed(spec, argv, BOX_FILES, pass_fds=(reply_end,),
                               stdin=subprocess.PIPE, stdout=self._log, stderr=self._log)
        finally:
            os.close(reply_end)  # the worker holds the only write end: its death reads as end of file
        self.proc = self.jail.proc
        reply = self._request({"op": "load", "source": source})
        if not reply.get("ok"):
            self.close()
            raise SandboxError("harness failed to load:\n" + str(reply.get("error")))

    def calls(self, calls: list[tuple[int, str, object]]) -> list[tuple[bool, object]]:
        """Run ``(episode, hook, argument)`` calls; each result is (ok, wire action or traceback)."""
        if not calls:
            return []
        started = time.monotonic()
        try:
            reply = self._request({"op": "calls", "calls": [list(c) for c in calls]}, self.hook_budget_s - self.hook_s)
        finally:
            self.hook_s += time.monotonic() - started
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(calls) or not all(
                isinstance(r, list) and len(r) == 2 for r in results):
            self.close()
            raise SandboxError("worker sent a malformed reply")
        return [(ok is True, payload) for ok, payload in results]

    def budget(self, episodes: int) -> None:
        """Wall-clock seconds all hook calls of this worker may take together: ``hook_s_per_episode``
        for each of ``episodes`` (a hook that stays just under ``hook_timeout_s`` on every batch
        would otherwise stretch an evaluation by minutes)."""
        self.hook_budget_s, self.hook_s = self.limits.hook_s_per_episode * episodes, 0.0

    def _request(self, msg: dict, budget_s: float | None = None) -> dict:
        if self.proc.poll() is not None:
            raise SandboxError(self._death())
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise SandboxError(self._death()) from None
        frame = self._read_frame(budget_s)
        try:
            reply = json.loads(frame)
        except (json.JSONDecodeError, UnicodeDecodeError):
            reply = None
        if not isinstance(reply, dict):
            self.close()
            raise SandboxError("worker sent a reply that is not a JSON object")
        return reply

    def _read_frame(self, budget_s: float | None) -> bytes:
        timeout = self.limits.hook_timeout_s
        why = f"hook calls exceeded the wall-clock limit of {timeout}s"
        if budget_s is not None and budget_s < timeout:
            timeout = max(budget_s, 0.0)
            why = (f"hook calls exceeded this evaluation's wall-clock budget of {self.hook_budget_s:g}s "
                   f"(sandbox.hook_s_per_episode {self.limits.hook_s_per_episode:g} per episode)")
        deadline = time.monotonic() + timeout
        header = self._read_exactly(HEADER.size, deadline, why)
        (size,) = HEADER.unpack(header)
        if size > self.limits.output_kb * 1024:
            self.close()
            raise SandboxError(f"worker reply exceeded the output limit of {self.limits.output_kb} KB")
        return self._read_exactly(size, deadline, why)

    def _read_exactly(self, n: int, deadline: float, why: str) -> bytes:
        chunks, got = [], 0
        with selectors.DefaultSelector() as sel:
            sel.register(self._replies, selectors.EVENT_READ)
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    self.close()
                    raise SandboxError(why)
                chunk = os.read(self._replies, min(n - got, 1 << 20))
                if not chunk:
                    raise SandboxError(self._death())
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._log.seek(0)
        err = self._log.read()[-4000:].decode("utf-8", errors="replace")
        reason = {-signal.SIGXCPU: "CPU-time limit", -signal.SIGKILL: "killed (memory or CPU limit)",
                  -signal.SIGXFSZ: "output log limit", 137: "killed (memory or CPU limit)"}.get(code)
        if "MemoryError" in err:
            reason = "memory limit"
        self.close()
        return f"worker died ({reason or f'exit code {code}'}): {err.strip()[-800:]}"

    def close(self) -> None:
        """Tear the jail down; never raises (a failed cleanup must not stop the run)."""
        self.jail.close()
        for closing in (self.proc.stdin.close, self._log.close, lambda: os.close(self._replies)):
            try:
                closing()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
