"""The code a run's process runs: a commit, a commit plus the hash of an uncommitted diff, or the
installed package's version; and a resume under other code is recorded and said."""
import logging
import subprocess
from importlib.metadata import version
from types import SimpleNamespace

from whale.provenance import code_version
from whale.run.context import Run
from whale.store import Store


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def checkout(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    git(root, "add", "a.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    return root


def test_a_clean_checkout_is_its_commit_and_a_changed_one_its_commit_plus_the_diff(tmp_path):
    root = checkout(tmp_path)
    head = git(root, "rev-parse", "HEAD").strip()
    assert code_version(root) == head
    (root / "notes.txt").write_text("untracked files are not code the run imports\n")
    assert code_version(root) == head
    (root / "a.py").write_text("x = 2\n")
    dirty = code_version(root)
    assert dirty.startswith(head + "+dirty.") and dirty != head
    assert code_version(root) == dirty  # the same change reads the same
    (root / "a.py").write_text("x = 3\n")
    assert code_version(root) not in (head, dirty)


def test_outside_the_top_of_a_checkout_it_is_the_package_version(tmp_path):
    root = checkout(tmp_path)
    (root / "site").mkdir()  # a package installed inside somebody else's checkout
    assert code_version(root / "site") == f"whale {version('whale')}"
    assert code_version(tmp_path) == f"whale {version('whale')}"


def test_every_start_is_stored_and_a_resume_under_other_code_is_said(tmp_path, monkeypatch, caplog):
    versions = iter(["c1", "c1", "c2"])
    monkeypatch.setattr("whale.run.context.code_version", lambda: next(versions))
    with Store(tmp_path / "rollouts.duckdb") as store:
        run = SimpleNamespace(store=store, run_id="r")
        with caplog.at_level(logging.WARNING, logger="whale.run.context"):
            Run._record_start(run)
            Run._record_start(run)
            assert not caplog.records
            Run._record_start(run)
        assert "resumes under other code: c2 (it last started under c1)" in caplog.text
        assert [r[0] for r in store.query("SELECT code FROM run_starts ORDER BY start")] == ["c1", "c1", "c2"]
