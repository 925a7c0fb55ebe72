"""The jail's seccomp filter: a classic-BPF program for bubblewrap's ``--seccomp FD``.

The program kills any process that makes a system call through another ABI than the host's
(32-bit ``int 0x80`` on x86_64, x32 numbers), answers ``EPERM`` to a deny list of calls a Python
tool or harness never needs and that widen the kernel's attack surface (tracing, other
processes' memory, mounts and namespaces, keyrings, eBPF, perf, userfaultfd, io_uring, modules,
clocks, swap, file handles), ``EPERM`` to ``clone`` asking for a new namespace and to
``personality`` setting anything but the default, and ``ENOSYS`` to ``clone3`` (its flags sit in
memory a filter cannot read; glibc then falls back to ``clone``). Everything else is allowed.
"""
from __future__ import annotations

import errno
import os
import struct
import sys

# name -> (x86_64, aarch64) numbers, from the kernel's unistd_64.h and asm-generic/unistd.h; None
# where the call does not exist on that architecture.
DENIED = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438), "kcmp": (312, 272), "process_madvise": (440, 440),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "unshare": (272, 97), "setns": (308, 268),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282), "fanotify_init": (300, 262),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "reboot": (169, 142),
    "swapon": (167, 224), "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60),
    "quotactl_fd": (443, 443), "lookup_dcookie": (212, 18), "vhangup": (153, 58), "syslog": (103, 116),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171), "clock_adjtime": (305, 266),
    "iopl": (172, None), "ioperm": (173, None), "modify_ldt": (154, None), "uselib": (134, None),
    "_sysctl": (156, None), "nfsservctl": (180, 42),
}
CLONE, CLONE3, PERSONALITY = (56, 220), (435, 435), (135, 92)
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # machine -> (column, AUDIT_ARCH_*)
X32_BIT = 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (clone's flags, low 32 bits)
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
PERSONALITY_OK = (0, 0xFFFFFFFF)  # PER_LINUX, and the query that changes nothing

# classic BPF (linux/filter.h, linux/seccomp.h)
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low half: both arches are little-endian)


def machine() -> str:
    return os.uname().machine


def unsupported(arch: str | None = None) -> str | None:
    """Why no filter can be built for ``arch`` (the host's by default), or None when one can."""
    arch = arch or machine()
    if arch not in ARCHES:
        return (f"no seccomp filter for {arch!r} (only {', '.join(ARCHES)}): jailed code has the whole "
                "system-call surface")
    if sys.byteorder != "little" or sys.maxsize < 2**32:
        return f"no seccomp filter for a {sys.byteorder}-endian or 32-bit Python on {arch!r}"
    return None


def program(arch: str | None = None) -> bytes:
    """The filter as bwrap reads it: ``struct sock_filter`` entries in native byte order."""
    arch = arch or machine()
    reason = unsupported(arch)
    if reason:
        raise ValueError(reason)
    column, audit_arch = ARCHES[arch]
    code: list[tuple] = [  # (op, k, jump if true, jump if false); a jump names a label or is 0 (next)
        (LD_ABS_W, ARCH, 0, 0),
        (JEQ, audit_arch, 0, "kill"),
        (LD_ABS_W, NR, 0, 0),
    ]
    if arch == "x86_64":
        code.append((JGE, X32_BIT, "kill", 0))
    code += [(JEQ, CLONE[column], "clone", 0), (JEQ, PERSONALITY[column], "personality", 0),
             (JEQ, CLONE3[column], "enosys", 0)]
    code += [(JEQ, nrs[column], "eperm", 0) for nrs in DENIED.values() if nrs[column] is not None]
    code += [
        (RET, RET_ALLOW, 0, 0),
        "clone", (LD_ABS_W, ARG0, 0, 0), (JSET, CLONE_NAMESPACES, "eperm", "allow"),
        "personality", (LD_ABS_W, ARG0, 0, 0),
        *[(JEQ, ok, "allow", 0) for ok in PERSONALITY_OK],
        "eperm", (RET, RET_ERRNO | errno.EPERM, 0, 0),
        "enosys", (RET, RET_ERRNO | errno.ENOSYS, 0, 0),
        "kill", (RET, RET_KILL_PROCESS, 0, 0),
        "allow", (RET, RET_ALLOW, 0, 0),
    ]
    return assemble(code)


def assemble(code: list) -> bytes:
    """Resolve labels (strings in the list, naming the next instruction) into relative jumps."""
    labels, insns = {}, []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = []
    for at, (op, k, jt, jf) in enumerate(insns):
        offsets = [labels[j] - at - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= o <= 255 for o in offsets):
            raise ValueError(f"jump out of range at instruction {at}: {offsets}")
        out.append(struct.pack("=HBBI", op, *offsets, k))
    return b"".join(out)


def pipe_with(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (write end closed): bwrap reads it to the end."""
    read, write = os.pipe()
    try:
        view = memoryview(data)
        while view:  # the program (< 1 KiB) fits a pipe's buffer; no reader needed while writing
            view = view[os.write(write, view):]
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
