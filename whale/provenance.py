"""Which code a process runs, recorded with every start of a run (``run_starts``): a resumed run
may run other code than the one it started with, and its store should say so."""
from __future__ import annotations

import hashlib
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_version(root: str | Path = ROOT) -> str:
    """``<commit>`` of the checkout at ``root``; ``<commit>+dirty.<hash>`` when tracked files differ
    from it (the hash of the diff, so the same uncommitted change reads the same); ``whale <version>``
    outside a git checkout (an installed wheel); ``unknown`` when neither can be told."""
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").strip()).resolve()
        if top != Path(root).resolve():  # an installed package inside some other checkout
            raise subprocess.SubprocessError(f"{root} is not the top of a git checkout")
        commit = _git(root, "rev-parse", "HEAD").strip()
        diff = _git(root, "diff", "HEAD", "--no-ext-diff", "--binary")
    except (OSError, subprocess.SubprocessError):
        try:
            return f"whale {version('whale')}"
        except PackageNotFoundError:
            return "unknown"
    if not diff:
        return commit
    return f"{commit}+dirty.{hashlib.sha256(diff.encode()).hexdigest()[:12]}"


def short_code(code: str) -> str:
    """``code`` with its commit cut to 12 hex digits, keeping a ``+dirty.<hash>`` suffix."""
    commit, sep, rest = code.partition("+")
    return (commit[:12] if len(commit) == 40 else commit) + sep + rest


def _git(root: str | Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout
