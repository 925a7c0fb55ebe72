"""The sandbox worker: runs one harness's hooks for many episodes, speaking JSON lines on stdio.

Started by ``harnesses/sandbox.py`` as ``python -I -S _worker.py ROOT`` with a scrubbed
environment and resource limits. Only ``harnesses.contract`` and an allow-list of standard
modules can be imported by harness code; builtins that reach files or code objects are gone.
"""
import json
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
    exec(compile(source, "harness.py", "exec"), module)  # noqa: S102 (this is the sandbox)
    cls = module.get("Harness")
    if not isinstance(cls, type) or not issubclass(cls, contract.BaseHarness):
        raise TypeError("the module must define `class Harness(BaseHarness)`")
    return cls


def budget(instance, contract) -> dict:
    turns, tokens = instance.max_turns, instance.token_budget
    if not (isinstance(turns, int) and isinstance(tokens, int) and turns >= 1 and tokens >= 1):
        raise TypeError("max_turns and token_budget must be positive ints")
    return {"max_turns": min(turns, contract.HARD_MAX_TURNS), "token_budget": min(tokens, contract.HARD_TOKEN_BUDGET)}


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
                    extra = budget(episodes[episode], contract)
                action = getattr(episodes[episode], hook)(arg)
                results.append([True, {**contract.to_wire(action), **extra}])
            except BaseException as e:  # a broken hook fails its episode, not the worker
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                results.append([False, traceback.format_exc(limit=4)])
        send({"results": results})


def main() -> None:
    root = sys.argv[1]
    sys.path.insert(0, root)
    from harnesses import contract

    sys.path.remove(root)  # harness code must not reach the project's other modules
    for name in ALLOWED_MODULES - {"harnesses", "harnesses.contract", "__future__"}:
        __import__(name)
    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints from harness code must not corrupt the protocol

    def send(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    serve(contract, send)


if __name__ == "__main__":
    main()
