"""What the jail holds beyond its namespaces: every writable place has a size cap, no new user
namespace can be made inside, and the host-wide /proc files read as empty. Each test runs real
code in the real jail and fails without the rule it names."""
from __future__ import annotations

import subprocess

from harnesses import jail


def in_jail(code: str) -> str:
    """Output of ``code`` run by the jail's Python (no braces: the jail formats its argv)."""
    with jail.Jailed(jail.JailSpec(), [jail.python_binary(), "-I", "-S", "-c", code],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as j:
        out, _ = j.proc.communicate(timeout=60)
    return out.decode()


FILL = """
import os
def fill(path):
    try:
        with open(path, "wb") as f:
            for _ in range({chunks}):
                f.write(b"x" * (1 << 20))
        return os.path.getsize(path)
    except OSError as e:
        return type(e).__name__ + " " + str(os.path.getsize(path) if os.path.exists(path) else -1)
for place in ("/dev/shm/x", "/dev/x", "/tmp/x"):
    print(place, fill(place))
"""


def test_no_writable_place_takes_more_than_its_cap():
    chunks = (jail.SHM_BYTES + jail.TMP_BYTES) // (1 << 20) + 8
    lines = dict(line.split(" ", 1) for line in in_jail(FILL.format(chunks=chunks)).split("\n") if line)
    assert set(lines) == {"/dev/shm/x", "/dev/x", "/tmp/x"}, lines
    for place, result in lines.items():
        assert result.startswith("OSError"), (place, result)  # refused, not written in full
        assert int(result.split()[-1]) <= max(jail.SHM_BYTES, jail.TMP_BYTES), (place, result)


def test_no_user_namespace_can_be_made_inside():
    out = in_jail("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                  "print('made' if libc.unshare(0x10000000) == 0 else 'refused', ctypes.get_errno())")  # CLONE_NEWUSER
    assert out.startswith("refused"), out


def test_host_wide_proc_files_say_nothing():
    out = in_jail("for p in " + repr(jail.HOST_PROC) + ":\n"
                  "    try:\n        print(p, len(open(p).read()))\n"
                  "    except OSError as e:\n        print(p, type(e).__name__)")
    lines = dict(line.split() for line in out.splitlines())
    assert set(lines) == set(jail.HOST_PROC), out
    assert all(v in ("0", "PermissionError") for v in lines.values()), out  # empty or unreadable
