"""The Python tool: model-written code in a separate, limited process.

Layers, outermost first:
- the OS jail (``harnesses/jail.py``: bubblewrap, uid 65534, own pid and network namespaces, a
  process cap, nothing of the project visible): the boundary. The child sees the Python runtime,
  its entry point under ``/box`` and a fresh ``/work`` in memory holding a copy of ``main.py``,
  capped in total (``jail.WORK_BYTES``); nothing written there reaches the host;
- a child ``python -I -S -X utf8`` (no site-packages, no user paths, no PYTHON* variables) with
  an empty environment;
- resource limits the child sets on itself before any model code: address space, CPU seconds,
  size of any file written (which also bounds the captured output), no core files, processes;
- an audit hook installed before the model's code runs, whatever the namespace did: it refuses
  sockets, new processes, signals to other processes and ctypes, writes outside the working
  directory and reads outside the standard library and the working directory (so the data
  directory, with its gold answers, cannot be opened). It gives friendly errors; the jail holds;
- a wall-clock timeout that kills the whole jail.
"""
from __future__ import annotations

import ast
import math
import re
import signal
import subprocess
import tempfile
from pathlib import Path

from harnesses.jail import Jailed, JailSpec, python_binary

# The child's entry point: it limits itself, installs the audit hook, runs main.py.
BOX_FILES = {"child.py": Path(__file__).with_name("child.py")}
DEFAULT_JAIL = JailSpec()
TRUNCATED = "\n[output truncated]"
NO_OUTPUT = "[no output]"
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)(?:```|\Z)", re.S | re.I)
_BARE_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str:
    """The first ```python fenced block when there is one (else the first bare fence, else all)."""
    match = _FENCE.search(text) or _BARE_FENCE.search(text)
    return match.group(1) if match else text


def show_last_expression(source: str) -> str:
    """Print the value of a final top-level expression statement unless it is None (REPL-like).

    Decided on the syntax tree, so ``x = 5`` or a final ``for`` loop is left alone; code that
    does not parse is left as is and fails with its own SyntaxError.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return source
    node = tree.body[-1].value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
        return source  # already prints; left untouched so tracebacks quote the model's line
    data = source.encode("utf-8")
    lines = data.splitlines(keepends=True)
    # ast offsets are UTF-8 byte columns within 1-based lines.
    start = sum(map(len, lines[: node.lineno - 1])) + node.col_offset
    end = sum(map(len, lines[: node.end_lineno - 1])) + node.end_col_offset
    expr = data[start:end].decode("utf-8")
    shown = f"_ = ({expr})\nif _ is not None: print(_)"
    return data[:start].decode("utf-8") + shown + data[end:].decode("utf-8")


def prepare_code(text: str) -> str:
    return show_last_expression(extract_code(text))


def run_python(code: str, timeout_s: float, memory_mb: int = 512, output_limit: int = 4096,
               jail: JailSpec = DEFAULT_JAIL) -> dict:
    """Run ``code`` (a fenced block is extracted) and return {"output", "ok", "timed_out"}.

    ``output`` is stdout and stderr interleaved, at most ``output_limit`` characters, with a
    note when the run timed out, was killed or printed nothing.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a string, got {type(code).__name__}")
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number, got {timeout_s!r}")
    if memory_mb < 64 or output_limit < 1:
        raise ValueError("memory_mb must be >= 64 and output_limit >= 1")
    with tempfile.TemporaryDirectory(prefix="whale-py-") as root:
        work = Path(root, "work")
        work.mkdir()
        (work / "main.py").write_text(prepare_code(code), encoding="utf-8")
        out_path = Path(root, "output")
        fsize = max(65536, 4 * output_limit + 1024)
        with out_path.open("wb") as out:
            returncode, timed_out = _run_child(work, out, timeout_s, memory_mb, fsize, jail)
        raw = out_path.read_bytes()[:fsize].decode("utf-8", errors="replace")
    return {
        "output": _render(raw, returncode, timed_out, timeout_s, output_limit),
        "ok": returncode == 0 and not timed_out,
        "timed_out": timed_out,
    }


def _run_child(work: Path, out, timeout_s: float, memory_mb: int, fsize: int, jail: JailSpec) -> tuple[int, bool]:
    limits = [str(jail.address_space_mb(memory_mb, work=True)), str(math.ceil(timeout_s) + 1), str(fsize),
              str(jail.max_processes)]
    argv = [python_binary(), "-I", "-S", "-X", "utf8", "-u", "{box}/child.py", *limits]
    with Jailed(jail, argv, BOX_FILES, workdir=work, stdin=subprocess.DEVNULL, stdout=out, stderr=out) as child:
        try:
            return child.proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            child.close()  # kills everything the code started, not only the first process
            return child.proc.returncode, True


def _render(raw: str, returncode: int, timed_out: bool, timeout_s: float, limit: int) -> str:
    notes = []
    if timed_out:
        notes.append(f"[timed out after {timeout_s:g} s]")
    elif returncode == -signal.SIGXCPU:
        notes.append("[killed: CPU time limit]")
    elif returncode < 0:
        notes.append(f"[killed by signal {-returncode}]")
    elif returncode > 0 and not raw.strip():
        notes.append(f"[exit status {returncode}]")
    if not raw.strip() and not notes:
        return NO_OUTPUT[:limit]
    tail = "".join("\n" + n for n in notes) if raw else "\n".join(notes)
    if len(raw) + len(tail) > limit:
        room = limit - len(TRUNCATED) - len(tail)
        if room < 0:
            return (raw + tail)[:limit]
        raw = raw[:room] + TRUNCATED
    return raw + tail
