"""The sandbox worker: runs one harness's hooks for many episodes inside the jail.

Started by ``harnesses/sandbox.py`` as ``python -I -S /box/_worker.py /box FD CPU_S MEMORY_MB NPROC``
in the bubblewrap jail (see ``harnesses/jail.py``). Requests come as JSON lines on stdin; replies go
as length-prefixed frames on file descriptor FD, so nothing the harness prints (stdout and stderr go
to a capped log) can be taken for a reply. The limits are set here, before any harness code runs.

Only ``harnesses.contract`` and an allow-list of standard modules can be imported by harness code,
and builtins that reach files or code objects are gone. These rules give friendly, early errors;
they are not the boundary (the jail is), and the engine re-checks and clamps every reply.
"""
import json
import os
import struct
import sys
import traceback

ALLOWED_MODULES = frozenset({
    "re", "json", "math", "itertools", "collections", "string", "textwrap", "random",
    "statistics", "functools", "dataclasses", "typing", "__future__", "harnesses.contract",
    "harnesses",
})
FORBIDDEN_BUILTINS = ("open", "eval", "exec", "compile", "__import__", "globals", "locals",
                      "vars", "getattr", "setattr", "delattr", "breakpoint", "input", "help",
                      "exit", "quit", "memoryview")
HEADER = struct.Struct(">Q")
LOG_BYTES = 1 << 20


def limit_self(cpu_s: int, memory_mb: int, nproc: int) -> None:
    import resource

    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (LOG_BYTES, LOG_BYTES))  # the log is the only file it writes
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _importer(real_import):
    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name not in ALLOWED_MODULES:
            raise ImportError(f"import of {name!r} is not allowed in a harness")
        return real_import(name, globals, locals, fromlist, level)
    return guarded


def load_harness(source: str, contract):
    import builtins

    safe = {k: v for k, v in vars(builtins).items() if k not in FORBIDDEN_BUILTINS}
    safe["__import__"] = _importer(builtins.__import__)
    module = {"__builtins__": safe, "__name__": "candidate_harness"}
    exec(compile(source, "harness.py", "exec"), module)  # noqa: S102 (this runs inside the jail)
    cls = module.get("Harness")
    if not isinstance(cls, type) or not issubclass(cls, contract.BaseHarness):
        raise TypeError("the module must define `class Harness(BaseHarness)`")
    return cls


def serve(contract, send) -> None:
    cls, episodes = None, {}
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "load":
            try:
                cls = load_harness(msg["source"], contract)
                send({"ok": True})
            except BaseException:
                send({"ok": False, "error": traceback.format_exc(limit=4)})
            continue
        results = []
        for episode, hook, arg in msg["calls"]:
            try:
                extra = {}
                if hook == "start":
                    episodes[episode] = cls()
                    # Reported as declared: the engine validates and clamps them.
                    extra = {"max_turns": episodes[episode].max_turns, "token_budget": episodes[episode].token_budget}
                action = getattr(episodes[episode], hook)(arg)
                results.append([True, {**contract.to_wire(action), **extra}])
            except BaseException as e:  # a broken hook fails its episode, not the worker
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                results.append([False, traceback.format_exc(limit=4)])
        send({"results": results})


def main() -> None:
    root, fd, cpu_s, memory_mb, nproc = sys.argv[1], *map(int, sys.argv[2:6])
    sys.path.insert(0, root)
    from harnesses import contract

    sys.path.remove(root)
    for name in ALLOWED_MODULES - {"harnesses", "harnesses.contract", "__future__"}:
        __import__(name)
    limit_self(cpu_s, memory_mb, nproc)

    def send(obj):
        data = json.dumps(obj).encode("utf-8")
        data = memoryview(HEADER.pack(len(data)) + data)
        while data:
            data = data[os.write(fd, data):]

    serve(contract, send)


if __name__ == "__main__":
    main()
