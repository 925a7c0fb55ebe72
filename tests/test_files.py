import json

import pytest

from whale import files
from whale.files import write_atomic, write_json


def test_write_atomic_creates_parents_and_replaces(tmp_path):
    path = tmp_path / "a" / "b" / "x.txt"
    write_atomic(path, "one")
    write_atomic(path, "two\n")
    assert path.read_text() == "two\n"
    write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.txt"]


def test_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    write_json(path, {"mean_at_k": 0.5})

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_json(path, {"mean_at_k": 0.9})
    assert json.loads(path.read_text()) == {"mean_at_k": 0.5}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
