"""Entry point of the Python tool's child process: ``python -I -S child.py MEMORY_MB CPU_S FSIZE NPROC``.

It limits itself (resources, network namespace), installs an audit hook (see ``pytool.py`` for
all the layers), then runs ``main.py`` from the working directory as ``__main__`` and prints a
traceback without this file's own frame, so the output depends only on the model's code.
Limits are set here rather than in a ``preexec_fn``: the parent (the engine) has threads, and
running Python between fork and exec in a threaded process can deadlock.
"""
import math
import os
import sys
import traceback
from types import FunctionType

BLOCKED = ("socket.", "subprocess.", "_posixsubprocess.", "os.system", "os.exec", "os.spawn",
           "os.posix_spawn", "os.fork", "os.forkpty", "pty.", "os.kill", "os.killpg",
           "signal.pthread_kill", "ctypes.", "gc.get_", "sys._current_frames", "mmap.")
# Events that change the file system, and how many leading arguments are paths.
CHANGES = {"os.remove": 1, "os.rmdir": 1, "os.rename": 2, "os.mkdir": 1, "os.chmod": 1,
           "os.chown": 1, "os.truncate": 1, "os.link": 2, "os.symlink": 2, "os.utime": 1,
           "os.chflags": 1, "os.setxattr": 1, "os.removexattr": 1, "shutil.rmtree": 1}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CLONE_NEWNET = 0x40000000


def isolate(memory_mb, cpu_s, fsize, nproc):
    """Resource limits, then a new empty network namespace where the kernel allows it (the jail
    has made one already; this matters only with ``sandbox.jail: none``)."""
    import resource

    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Counted per user namespace; where the engine is root the jail's pids cgroup caps instead.
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)  # fails quietly without privileges
    except (ImportError, OSError, AttributeError):
        pass
    # A later `import ctypes` re-runs the module, whose dlopen the audit hook refuses.
    sys.modules.pop("ctypes", None)


def install_guard():
    cwd = os.path.realpath(os.getcwd())
    readable = tuple(os.path.realpath(p) for p in sys.path if p) + (cwd,)

    # Everything the hook needs is bound as a default, not a closure or a global, so model code
    # cannot rebind it (function attribute writes are refused below).
    def hook(event, args, blocked=BLOCKED, changes=CHANGES, cwd=(cwd,), readable=readable,
             devices=("/dev/null", "/dev/urandom"), write_flags=WRITE_FLAGS,
             realpath=os.path.realpath, fsdecode=os.fsdecode, sep=os.sep,
             function=FunctionType, internals=("__code__", "__defaults__", "__kwdefaults__")):
        def inside(path, roots):
            if isinstance(path, int):
                return True
            p = realpath(fsdecode(path))
            return p in devices or any(p == r or p.startswith(r + sep) for r in roots)

        if event.startswith(blocked):
            raise PermissionError(f"{event} is not allowed in this sandbox")
        if event == "object.__setattr__" and isinstance(args[0], function) and args[1] in internals:
            raise PermissionError("changing a function's internals is not allowed in this sandbox")
        if event == "open":
            path, mode, flags = args
            writing = bool(flags & write_flags) if isinstance(flags, int) else any(c in (mode or "") for c in "wax+")
            if not inside(path, cwd if writing else readable):
                raise PermissionError(f"{'writing' if writing else 'reading'} {path!r} is not allowed in this sandbox")
        elif event in changes:
            for path in args[: changes[event]]:
                if path is not None and not inside(path, cwd):
                    raise PermissionError(f"changing {path!r} is not allowed in this sandbox")

    sys.addaudithook(hook)


def run_main():
    with open("main.py", encoding="utf-8") as f:
        source = f.read()
    # math is there already: a one-line expression (``math.comb(10, 3)``) needs no import line
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "math": math}
    try:
        exec(compile(source, "main.py", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 (report whatever the model's code raised)
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        sys.exit(1)


if __name__ == "__main__":
    isolate(*map(int, sys.argv[1:5]))
    install_guard()
    del isolate, install_guard, BLOCKED, CHANGES, WRITE_FLAGS
    run_main()
