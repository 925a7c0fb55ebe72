"""SIGTERM or SIGINT to a running `whale run` stops everything it started: the temporary Prefect
server, jail workers, model servers. The run is started in a session of its own, so every process
it spawned (even one reparented to init) is found by its session id afterwards."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.flows.test_resume import env_for, whale_cmd
from whale.testing import make_project


def session_members(sid: int) -> list[str]:
    """``pid command`` of every live process in session ``sid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(f"{d.name} {cmd}")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
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
                proc.send_signal(sig)  # to the run alone, as `kill PID` or Ctrl-C in a script does
                break
        else:
            pytest.fail("the run ended before its first RSFT step:\n" + "".join(seen[-40:]))
        try:
            rest = proc.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:  # a survivor holds the output pipe open
            pytest.fail(f"after {sig.name}: still running {session_members(proc.pid)}")
        assert proc.returncode != 0, "an interrupted run must not exit 0"
        deadline = time.time() + 30
        while session_members(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert session_members(proc.pid) == [], rest[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the leak under test must not outlive the test
        except ProcessLookupError:
            pass
        for member in session_members(proc.pid):
            try:
                os.kill(int(member.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
