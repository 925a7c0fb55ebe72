"""What the jail holds beyond its namespaces: every writable place has a size cap (the work
directory too, whose writes never reach the host), no new user namespace can be made inside,
the host-wide /proc files read as empty, and a seccomp filter refuses system calls Python work
never needs. Each test runs real code in the real jail and fails
without the rule it names."""
from __future__ import annotations

import errno
import re
import signal
import subprocess
from pathlib import Path

import pytest

from harnesses import jail, seccomp


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


def test_the_work_directory_is_capped_and_the_host_keeps_only_what_it_gave(tmp_path):
    (tmp_path / "main.py").write_text("seed")
    chunks = jail.WORK_BYTES // (1 << 20) + 8
    code = FILL.replace('("/dev/shm/x", "/dev/x", "/tmp/x")', '("/work/x",)').format(chunks=chunks)
    code += "open('/work/main.py', 'a').write(' more')\nprint('main', open('main.py').read())"
    with jail.Jailed(jail.JailSpec(), [jail.python_binary(), "-I", "-S", "-c", code], workdir=tmp_path,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as j:
        out = j.proc.communicate(timeout=60)[0].decode()
    result = dict(line.split(" ", 1) for line in out.splitlines())
    assert result["main"] == "seed more", out  # the given files are there, writable
    assert result["/work/x"].startswith("OSError"), out  # refused, not written in full
    assert int(result["/work/x"].split()[-1]) <= jail.WORK_BYTES, out
    assert [(f.name, f.read_text()) for f in tmp_path.iterdir()] == [("main.py", "seed")]  # nothing came back


def test_the_math_tool_cannot_fill_its_work_directory_file_by_file():
    from domains.math_reasoning.pytool import run_python  # each file is capped (RLIMIT_FSIZE), the total too

    code = ("n = 0\ntry:\n    while n < 400:\n        with open('f%d' % n, 'wb') as f:\n"
            "            f.write(b'x' * 60000)\n        n += 1\n    print('wrote', n)\n"
            "except OSError as e:\n    print('stopped', n, e.errno)")
    out = run_python(code, 20)["output"]
    assert out.startswith("stopped") and int(out.split()[2]) == errno.ENOSPC, out
    assert int(out.split()[1]) * 60000 <= jail.WORK_BYTES, out


def test_what_jailed_code_can_write_is_counted_against_its_memory_limit():
    """The in-memory /tmp, /dev/shm and /work are not in RLIMIT_AS: their sizes are taken off it,
    so memory plus everything writable stays within the configured limit."""
    from domains.math_reasoning.pytool import run_python
    from harnesses.sandbox import HarnessSandbox, Limits

    writable = (jail.TMP_BYTES + jail.SHM_BYTES + jail.WORK_BYTES) // 2**20
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)"
    assert run_python(code, 10, memory_mb=512)["output"].split() == [str(512 - writable)]
    spec = jail.JailSpec()
    assert spec.address_space_mb(1024) == 1024 - (jail.TMP_BYTES + jail.SHM_BYTES) // 2**20  # no /work there
    assert jail.JailSpec("none").address_space_mb(512, work=True) == 512  # no tmpfs without the jail
    with pytest.raises(ValueError, match="give at least"):
        spec.address_space_mb(100, work=True)
    with pytest.raises(ValueError, match="give at least"):
        HarnessSandbox((Path(jail.__file__).parent / "seeds/chess_puzzles.py").read_text(), Limits(memory_mb=80))


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


needs_filter = pytest.mark.skipif(seccomp.unsupported() is not None, reason=str(seccomp.unsupported()))
# name -> (arguments, errno without the filter here: a success, EINVAL or EFAULT, never EPERM)
PROBES = {
    "ptrace": "(0, 0, 0, 0)",  # PTRACE_TRACEME: allowed to anyone without the filter
    "process_vm_readv": "(os.getpid(), 0, 0, 0, 0, 0)",
    "kcmp": "(os.getpid(), os.getpid(), 0, 0, 0)",
    "keyctl": "(0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": "(b'user', b'whale', b'v', 1, -3)",
    "bpf": "(9999, 0, 0)",
    "perf_event_open": "(0, 0, -1, -1, 0)",
    "userfaultfd": "(1,)",  # UFFD_USER_MODE_ONLY
    "io_uring_setup": "(1, 0)",
    "name_to_handle_at": "(-100, b'/tmp', 0, 0, 0)",
    "mount": "(0, 0, 0, 0, 0)",
}
SYSCALLS = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(nr, *args)
    print(name, errno.errorcode.get(ctypes.get_errno(), result) if result == -1 else 'ran')
"""


@needs_filter
def test_the_seccomp_filter_refuses_the_kernel_surface_python_never_needs():
    column = seccomp.ARCHES[seccomp.machine()][0]
    lines = [f"call({name!r}, {seccomp.DENIED[name][column]}, *{args})" for name, args in PROBES.items()]
    lines += [f"call('personality', {seccomp.PERSONALITY[column]}, 0x40000)",  # ADDR_NO_RANDOMIZE
              f"call('clone3', {seccomp.CLONE3[column]}, 0, 0)"]
    out = in_jail(SYSCALLS + "\n".join(lines))
    results = dict(line.split() for line in out.splitlines())
    assert set(results) == {*PROBES, "personality", "clone3"}, out
    assert results.pop("clone3") == "ENOSYS", out  # so that glibc falls back to clone
    assert set(results.values()) == {"EPERM"}, out


@needs_filter
def test_python_work_goes_on_under_the_filter():
    code = """
import subprocess, sys, threading, os
def status():
    return [l for l in open('/proc/self/status') if l.startswith('Seccomp:')][0].split()[1]
print('filter', status())
child = subprocess.run([sys.executable, '-I', '-S', '-c', 'import os; print(os.getpid() > 1)'],
                       capture_output=True, text=True)
print('subprocess', child.stdout.strip())
pid = os.fork()
if pid == 0:
    os._exit(7)
print('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
seen = []
threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print('threads', len(seen))
with open('/tmp/f', 'w') as f:
    f.write('x' * 1000)
os.rename('/tmp/f', '/tmp/g')
import ctypes
print('files', os.path.getsize('/tmp/g'), ctypes.CDLL(None).personality(0xffffffff))  # a query is allowed
"""
    out = in_jail(code)
    assert out.split() == ["filter", "2", "subprocess", "True", "fork", "7", "threads", "4", "files", "1000", "0"], out


@needs_filter
@pytest.mark.skipif(seccomp.machine() != "x86_64", reason="x32 is an x86_64 ABI")
def test_a_system_call_through_another_abi_kills_the_process():
    code = "import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 39)\nprint('survived')"  # x32 getpid
    with jail.Jailed(jail.JailSpec(), [jail.python_binary(), "-I", "-S", "-c", code],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as j:
        out, _ = j.proc.communicate(timeout=60)
    assert b"survived" not in out and j.proc.returncode == 128 + signal.SIGSYS, (out, j.proc.returncode)


def test_without_a_filter_for_this_arch_the_jail_still_runs_and_says_why(monkeypatch):
    monkeypatch.setattr(seccomp, "machine", lambda: "mips")
    jail.seccomp_filter.cache_clear()
    try:
        with pytest.warns(UserWarning, match="without a seccomp filter.*'mips'"):
            out = in_jail("print([l for l in open('/proc/self/status') if l.startswith('Seccomp:')][0].split()[1])")
        assert out.strip() == "0", out
    finally:
        jail.seccomp_filter.cache_clear()


@pytest.mark.parametrize("header,column", [("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", 0),
                                           ("/usr/include/asm-generic/unistd.h", 1)], ids=["x86_64", "aarch64"])
def test_the_syscall_numbers_are_the_kernels(header, column):
    if not Path(header).exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    defined = dict(re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", Path(header).read_text()))
    table = {**seccomp.DENIED, "clone": seccomp.CLONE, "clone3": seccomp.CLONE3, "personality": seccomp.PERSONALITY}
    wrong = {name: (nrs[column], defined.get(name)) for name, nrs in table.items()
             if nrs[column] is not None and str(nrs[column]) != defined.get(name)}
    assert not wrong, wrong
