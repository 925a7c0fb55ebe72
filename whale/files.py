"""Atomic file writes: a reader sees the old file or the new one, never half of either, and a
crash mid-write leaves no partial file under the real name."""
import json
import os
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A hidden name with the pid: concurrent writers never share a temporary file, and globs such
    # as the archive's ``*.py`` never see one.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    binary = isinstance(data, bytes)
    try:
        with open(tmp, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, data: dict) -> Path:
    """Pretty, key-sorted JSON with a trailing newline, written atomically."""
    return write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
