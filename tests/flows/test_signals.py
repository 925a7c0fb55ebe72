"""SIGTERM or SIGINT to a running `whale run`, `whale eval` or `whale serve` stops everything it
started: the temporary Prefect server, jail workers, model servers. Each command is started in a
session of its own, so every process it spawned (even one reparented to init) is found by its
session id afterwards; the jail's processes, which bwrap puts in sessions of their own, are taken
from the command's process tree just before the signal and must all be gone after it."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.flows.test_resume import env_for, whale_cmd
from whale.testing import ROOT, make_project

SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])


@pytest.fixture(autouse=True)
def interruptible_children():
    """A non-interactive shell's background job (``make test &``) ignores SIGINT, and a child
    inherits an ignored signal across exec: the commands below would never see the Ctrl-C they are
    sent. Handled here instead of ignored, SIGINT reaches each child as the default."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def processes() -> dict[int, tuple[int, str, str, int]]:
    """pid -> (parent pid, start time, command, session) of every live process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ... (starttime is the 20th)
        if fields[0] != "Z":
            out[int(d.name)] = (int(fields[1]), fields[19], cmd, int(fields[3]))
    return out


def descendants(pid: int) -> set[tuple[int, str, str]]:
    """(pid, start time, command) of every live process below ``pid``: the jail's processes too,
    which bwrap puts in sessions of their own."""
    table, found, todo = processes(), set(), [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, start, cmd, _) in table.items():
            if ppid == parent:
                found.add((child, start, cmd))
                todo.append(child)
    return found


def survivors(seen: set[tuple[int, str, str]]) -> list[str]:
    """Those of ``seen`` still alive (the same pid and start time)."""
    table = processes()
    return [f"{pid} {cmd}" for pid, start, cmd in seen if pid in table and table[pid][1] == start]


def session_members(sid: int) -> list[str]:
    """``pid command`` of every live process in session ``sid``."""
    return [f"{pid} {cmd}" for pid, (_, _, cmd, session) in processes().items() if session == sid]


@pytest.mark.slow
@SIGNALS
def test_a_signal_mid_run_leaves_no_process_behind(tmp_path, tiny_model_dir, sig):
    overrides = make_project(tmp_path, tiny_model_dir)
    proc = subprocess.Popen(whale_cmd(overrides), cwd=tmp_path, env=env_for(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "RSFT step 0:" in line:  # the Prefect server, the backend and the jail are all up
                assert len(session_members(proc.pid)) > 1, "the run started no helper process"
                tree = descendants(proc.pid)  # the jail's processes are in sessions of their own
                proc.send_signal(sig)  # to the run alone, as `kill PID` or Ctrl-C in a script does
                break
        else:
            pytest.fail("the run ended before its first RSFT step:\n" + "".join(seen[-40:]))
        try:
            rest = proc.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:  # a survivor holds the output pipe open
            pytest.fail(f"after {sig.name}: still running {session_members(proc.pid)}")
        assert proc.returncode != 0, "an interrupted run must not exit 0"
        assert_session_empty(proc.pid, rest)
        assert_none_left(tree, rest)
    finally:
        kill_session(proc)


def assert_session_empty(sid: int, output: str) -> None:
    deadline = time.time() + 30
    while session_members(sid) and time.time() < deadline:
        time.sleep(0.5)
    assert session_members(sid) == [], output[-3000:]


def kill_session(proc: subprocess.Popen) -> None:
    """The leak under test must not outlive the test."""
    if proc.poll() is None:
        proc.kill()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for member in session_members(proc.pid):
        try:
            os.kill(int(member.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def start(cmd: list[str], cwd: Path) -> tuple[subprocess.Popen, Path]:
    """``cmd`` in a session of its own, its output in a file (nothing to drain while we watch)."""
    log = cwd / "out.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env_for(cwd), stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    return proc, log


def wait_for(proc: subprocess.Popen, log: Path, ready, what: str, timeout_s: float = 60):
    """Poll ``ready()`` until it gives something; fail when the command ends or time is up first."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        found = ready()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"no {what} (exit {proc.poll()}):\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen, log: Path, sig: signal.Signals) -> None:
    """Signal the command and check that it ended and took every process it had started with it."""
    seen = descendants(proc.pid)
    proc.send_signal(sig)  # to the command alone, as `kill PID` or Ctrl-C in a script does
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"after {sig.name}: still running {session_members(proc.pid)}")
    assert_session_empty(proc.pid, log.read_text())
    assert_none_left(seen, log.read_text())


def assert_none_left(seen: set[tuple[int, str, str]], output: str) -> None:
    deadline = time.time() + 30
    while survivors(seen) and time.time() < deadline:
        time.sleep(0.5)
    left = survivors(seen)
    for member in left:  # the leak under test must not outlive the test
        try:
            os.kill(int(member.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert left == [], output[-3000:]


@pytest.mark.slow
@SIGNALS
def test_a_signal_mid_evaluation_leaves_no_process_behind(tmp_path, tiny_model_dir, sig):
    overrides = make_project(tmp_path, tiny_model_dir)
    seed = ROOT / "harnesses" / "seeds" / "chess_puzzles.py"  # free text, up to 9 turns: seconds per episode batch
    cmd = [sys.executable, "-m", "whale.cli", "eval", "--domain", "chess_puzzles", "--split", "weight", "-k", "64",
           "--harness", str(seed), "--set", json.dumps(overrides)]
    proc, log = start(cmd, tmp_path)
    try:
        wait_for(proc, log, lambda: [p for p in descendants(proc.pid) if "/box/_worker.py" in p[2]],
                 "jailed harness worker")
        time.sleep(1)  # into generation
        assert proc.poll() is None, "the evaluation ended before it could be interrupted:\n" + log.read_text()[-3000:]
        stop(proc, log, sig)
        assert proc.returncode != 0, "an interrupted evaluation must not exit 0"
        assert not (tmp_path / "runs" / "eval-chess_puzzles" / "metrics").exists(), "metrics of a partial evaluation"
    finally:
        kill_session(proc)


@pytest.mark.slow
@SIGNALS
def test_a_signal_to_a_serving_server_leaves_no_process_behind(tmp_path, tiny_model_dir, sig):
    cmd = [sys.executable, "-m", "whale.cli", "--params", str(ROOT / "params.yaml"), "serve",
           "--model-dir", str(tiny_model_dir), "--port", "0"]
    proc, log = start(cmd, tmp_path)
    try:
        url = wait_for(proc, log, lambda: re.findall(r"whale serve: .* at (http://\S+/v1)", log.read_text()),
                       "address printed")[0]
        body = json.dumps({"model": tiny_model_dir.name, "prompt": "Hello", "max_tokens": 4}).encode()
        request = urllib.request.Request(url + "/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert reply.status == 200 and json.load(reply)["choices"], "the server did not answer"
        stop(proc, log, sig)
    finally:
        kill_session(proc)
