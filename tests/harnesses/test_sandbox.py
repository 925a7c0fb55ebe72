"""Hostile harnesses end as recorded errors with their reason; the run goes on."""
import os

import pytest

from harnesses.sandbox import HarnessSandbox, Limits, SandboxError, static_violations
from tests.toy_domain import ECHO_HARNESS, ToyDomain
from whale.rollout.backends.base import Sampling
from whale.rollout.backends.hf import TransformersBackend
from whale.rollout.engine import Engine

HEAD = "from harnesses.contract import BaseHarness, Prompt, Call, Finish\n"
START = '''
    def start(self, observation):
        return Prompt(messages=[{"role": "user", "content": "hi"}], max_new_tokens=4)
'''


def harness(body: str, top: str = "") -> str:
    return HEAD + top + "\nclass Harness(BaseHarness):\n" + START + body


def act(body: str, top: str = "") -> str:
    """A harness whose ``act`` hook has ``body`` (indented under the method)."""
    return harness("    def act(self, completion):\n" + "".join(f"        {line}\n" for line in body.split("\n")), top)


HOSTILE = {
    "syntax error": (HEAD + "class Harness(BaseHarness)\n    pass\n", "syntax error"),
    "exception in a hook": (act("raise RuntimeError('bad hook')"), "bad hook"),
    "infinite loop": (act("while True:\n    pass"), "wall-clock"),
    "memory bomb": (act("x = [bytearray(10**8) for _ in range(100)]\nreturn Finish()"), "MemoryError"),
    "api key from env": (act("return Call('echo', {'text': os.environ['ANTHROPIC_API_KEY']})", "import os\n"),
                         "'os' is not allowed"),
    "import the verifier": (act("return Finish()", "from domains.math_reasoning import verify\n"), "not allowed"),
    "escape via dunder": (act("return ().__class__.__bases__[0].__subclasses__()"), "dunder"),
    "wrong interface: no Harness": (HEAD + "class Agent(BaseHarness):\n    pass\n", "class Harness"),
    "wrong interface: bad return": (act("return 'e2e4'"), "must return Prompt, Call or Finish"),
    "wrong interface: not a subclass": (HEAD + "class Harness:\n    def start(self, o):\n        return None\n",
                                        "Harness(BaseHarness)"),
}


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    limits = Limits(cpu_s=20, memory_mb=512, hook_timeout_s=3, output_kb=256)
    return Engine(TransformersBackend(str(tiny_model_dir)), ToyDomain(2), Sampling(1.0, 1.0, 0), limits)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_harness_is_recorded_as_error(engine, name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    source, reason = HOSTILE[name]
    rollouts = engine.run(source, ToyDomain(2).items, k=2, seed=0, progress=False)
    assert len(rollouts) == 4
    for r in rollouts:
        assert r.stop_reason == "error" and r.reward == 0.0
        assert reason in r.error, r.error
        assert "sk-secret" not in repr(r.messages)
    # the engine goes on: a good harness runs right after
    good = engine.run(ECHO_HARNESS, ToyDomain(2).items, k=1, seed=0, progress=False)
    assert all(r.stop_reason != "error" for r in good)


def test_runtime_layers_hold_without_the_static_check():
    """Even if the static check were fooled, the worker refuses imports and has no secrets."""
    os.environ["ANTHROPIC_API_KEY"] = "sk-secret"
    try:
        for top in ("import os\n", "import socket\n", "from domains.math_reasoning import verify\n"):
            with pytest.raises(SandboxError, match="not allowed"):
                HarnessSandbox(harness("", top), static_check=False)
        probe = harness("    def act(self, completion):\n        return Finish(str(open))\n")
        with HarnessSandbox(probe, static_check=False) as sb:
            sb.calls([(0, "start", {})])
            [(ok, payload)] = sb.calls([(0, "act", "x")])
        assert not ok and "NameError" in payload
    finally:
        del os.environ["ANTHROPIC_API_KEY"]


def test_static_violations_name_lines():
    bad = static_violations(HEAD + "import subprocess\nclass Harness(BaseHarness):\n    x = eval('1')\n")
    assert any(v.startswith("line 2:") and "subprocess" in v for v in bad)
    assert any(v.startswith("line 4:") and "eval" in v for v in bad)
    assert static_violations(ECHO_HARNESS) == []


SLOW_HOOKS = act("sum(range(10 ** 7))\nreturn Finish()")  # well under the per-call limit, every call


# A hook call here takes about 0.1 s on a fast core: the stopped case's budget is well under one
# call's time, the other's well over all four, so the outcome does not depend on the machine's speed.
@pytest.mark.parametrize("per_episode, stopped", [(0.01, True), (30.0, False)])
def test_hook_calls_of_one_evaluation_share_a_wall_clock_budget(tokenizer, per_episode, stopped):
    from whale.rollout.backends.null import NullBackend

    limits = Limits(cpu_s=60, memory_mb=512, hook_timeout_s=30, hook_s_per_episode=per_episode)
    engine = Engine(NullBackend(tokenizer), ToyDomain(2), Sampling(), limits)
    rollouts = engine.run(SLOW_HOOKS, ToyDomain(2).items, k=2, seed=0, progress=False)
    errors = [r.error for r in rollouts if r.stop_reason == "error"]
    if stopped:
        assert len(errors) == 4 and all("budget of 0.04s" in e and "hook_s_per_episode" in e for e in errors)
    else:
        assert errors == []
