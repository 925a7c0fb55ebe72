"""Run untrusted harness code in a worker process with resource limits.

Containment, in layers: a static check of the source (forbidden imports, dunder attributes,
file and code builtins); a worker started isolated (``python -I -S``), in an empty directory,
with a scrubbed environment (no API keys), CPU-time and address-space limits, no network
namespace where the kernel allows it; restricted builtins and an import allow-list inside the
worker; a wall-clock limit on every batch of hook calls and a size limit on every reply.
Anything that goes wrong becomes a ``SandboxError`` (the whole harness is broken) or a failed
hook result (one episode is broken); neither can stop the caller.
"""
from __future__ import annotations

import ast
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harnesses._worker import ALLOWED_MODULES, FORBIDDEN_BUILTINS

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("_worker.py")
CLONE_NEWNET = 0x40000000


@dataclass
class Limits:
    cpu_s: int = 60
    memory_mb: int = 1024
    hook_timeout_s: float = 10.0
    output_kb: int = 4096


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


def _limit_child(limits: Limits):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        mem = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        try:  # an empty network namespace where permitted; the import allow-list holds regardless
            ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)
        except Exception:
            pass
    return apply


class HarnessSandbox:
    """One worker process hosting a harness; ``calls`` runs hooks for many episodes at once."""

    def __init__(self, source: str, limits: Limits | None = None, static_check: bool = True):
        self.limits = limits or Limits()
        bad = static_violations(source) if static_check else []
        if bad:
            raise SandboxError("static check failed:\n" + "\n".join(bad))
        self._dir = tempfile.TemporaryDirectory(prefix="whale-harness-")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(WORKER), str(ROOT)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self._dir.name, env=env,
            preexec_fn=_limit_child(self.limits), text=True,
        )
        reply = self._request({"op": "load", "source": source})
        if not reply.get("ok"):
            self.close()
            raise SandboxError("harness failed to load:\n" + str(reply.get("error")))

    def calls(self, calls: list[tuple[int, str, object]]) -> list[tuple[bool, object]]:
        """Run ``(episode, hook, argument)`` calls; each result is (ok, wire action or traceback)."""
        if not calls:
            return []
        reply = self._request({"op": "calls", "calls": [list(c) for c in calls]})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(calls):
            raise SandboxError("worker sent a malformed reply")
        return [(bool(ok), payload) for ok, payload in results]

    def _request(self, msg: dict) -> dict:
        if self.proc.poll() is not None:
            raise SandboxError(self._death())
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise SandboxError(self._death()) from None
        line = self._readline()
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self.close()
            raise SandboxError("worker sent output that is not JSON") from None

    def _readline(self) -> str:
        cap = self.limits.output_kb * 1024
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=self.limits.hook_timeout_s)
        sel.close()
        if not ready:
            self.close()
            raise SandboxError(f"hook calls exceeded the wall-clock limit of {self.limits.hook_timeout_s}s")
        line = self.proc.stdout.readline(cap + 1)
        if len(line) > cap:
            self.close()
            raise SandboxError(f"worker reply exceeded the output limit of {self.limits.output_kb} KB")
        if not line:
            raise SandboxError(self._death())
        return line

    def _death(self) -> str:
        code = self.proc.wait(timeout=5)
        err = self.proc.stderr.read()[-2000:] if self.proc.stderr else ""
        reason = {-signal.SIGXCPU: "CPU-time limit", -signal.SIGKILL: "killed (memory or CPU limit)"}.get(code)
        if "MemoryError" in err:
            reason = "memory limit"
        return f"worker died ({reason or f'exit code {code}'}): {err.strip()[-800:]}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, BrokenPipeError):
                pass
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
