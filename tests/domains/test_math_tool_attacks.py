"""Attacks on the Python tool that get past its audit hook (as an outside review did), each
answered by the jail: what the code reaches is checked in its output, caps from outside."""
from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

from domains.math_reasoning.pytool import run_python
from harnesses.jail import JailSpec
from tests.support.procs import PeakWatcher, wait_until_none

ROOT = Path(__file__).resolve().parents[2]
# fork_exec raises no audit event in Python 3.11: with it, model code runs any program.
SPAWN = '''
import _posixsubprocess, os
def spawn(*argv, setsid=False):
    r, w = os.pipe()
    pid = _posixsubprocess.fork_exec([a.encode() for a in argv], [argv[0].encode()], True, (), None, None,
        -1, -1, -1, -1, -1, -1, r, w, False, setsid, -1, None, None, None, -1, None, False)
    os.close(w)
    return pid
'''


def test_hook_bypass_by_fork_exec_runs_a_shell_that_sees_nothing(canary):
    cmd = f"id -u; cat {canary} {ROOT}/params.yaml /proc/1/environ; echo; echo ROOT $(ls /); echo PROC $(ls /proc)"
    out = run_python(SPAWN + f"os.waitpid(spawn('/bin/sh', '-c', {cmd!r}), 0)", 5)["output"]
    assert out.startswith("65534\n"), out
    assert "CANARY" not in out and "profile:" not in out and str(ROOT) not in out.replace(f"{ROOT}/params", "")
    lines = {line.split(" ")[0]: line.split(" ")[1:] for line in out.splitlines() if line.startswith(("ROOT", "PROC"))}
    assert set(lines["ROOT"]) <= {"bin", "box", "dev", "lib", "lib32", "lib64", "proc", "root", "tmp", "usr", "work"}
    assert max(int(p) for p in lines["PROC"] if p.isdigit()) < 10  # its own pid namespace: no host process


def test_hook_bypass_by_rebinding_posixpath_reads_nothing_of_the_host(canary):
    code = ("import posixpath\nposixpath._joinrealpath = lambda path, rest, strict, seen: ('/work/x', True)\n"
            f"for p in ({str(canary)!r}, {str(ROOT / 'params.yaml')!r}):\n"
            "    try:\n        print(open(p).read())\n    except OSError as e:\n        print(type(e).__name__)")
    out = run_python(code, 5)["output"]
    assert "CANARY" not in out and "profile:" not in out and out.count("FileNotFoundError") == 2, out


def test_sqlite_cannot_write_outside(tmp_path):
    target = tmp_path / "escape.db"
    code = f"import sqlite3\nc = sqlite3.connect({str(target)!r})\nc.execute('create table t(x)')\nc.commit()"
    run_python(code, 5)
    assert not target.exists()


def test_spawned_process_has_no_network(canary):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1); print('CONNECTED')"
        out = run_python(SPAWN + f"os.waitpid(spawn({sys.executable!r}, '-c', {probe!r}), 0)", 5)["output"]
        with pytest.raises(TimeoutError):
            server.accept()
    assert "CONNECTED" not in out


def test_fork_bomb_is_capped_and_nothing_outlives_the_tool():
    cap = 8
    marker = "31.4159"
    bomb = SPAWN + ("for _ in range(300):\n    try:\n        spawn('/bin/sleep', '" + marker + "', setsid=True)\n"
                    "    except OSError:\n        pass\nprint('spawned')\n")
    result = {}
    with PeakWatcher(marker) as watch:
        worker = threading.Thread(target=lambda: result.update(run_python(bomb, 3, jail=JailSpec("bwrap", cap))))
        worker.start()
        worker.join()
    assert "spawned" in result["output"]
    assert 0 < watch.peak < cap, watch.peak  # counted from the host: the cap held
    assert wait_until_none(marker) == 0  # setsid children died with the jail


def test_immutable_flag_cannot_be_set_and_cleanup_works():
    code = ("import fcntl, struct\nf = open('keep.txt', 'w')\n"
            "try:\n    fcntl.ioctl(f.fileno(), 0x40086602, struct.pack('i', 0x10))\n    print('IMMUTABLE')\n"
            "except OSError as e:\n    print('refused', e.errno)")
    assert "IMMUTABLE" not in run_python(code, 5)["output"]
