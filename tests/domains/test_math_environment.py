"""The math environment's tool protocol, and the math harnesses' hooks driven by hand."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from domains.math_reasoning import MathEnvironment, ToolLimits, make_domain
from harnesses.contract import Call, Finish, Prompt, from_wire, to_wire
from whale.types import Example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Example(id="math-test-0", split="test", public={"question": "What is 12345 * 6789?"},
                  gold={"answer": 83810205})


def load_harness(relative: str):
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_")[:-3], ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Harness()


def test_reset_shows_the_question_and_the_tool_not_the_gold():
    obs = MathEnvironment(EXAMPLE).reset()
    assert obs["question"] == "What is 12345 * 6789?" and set(obs) == {"question", "tools"}
    assert "python" in obs["tools"] and "timeout_s" in obs["tools"]["python"]
    assert "83810205" not in str(obs)


def test_python_call_runs_and_is_counted():
    env = MathEnvironment(EXAMPLE, {"max_timeout_s": 0.5})
    env.reset()
    obs = env.step(Call("python", {"code": "print(12345 * 6789)"}))
    assert obs.data == {"tool": "python", "output": "83810205\n", "ok": True, "timed_out": False} and not obs.done
    # A long timeout asked for by the harness is clamped to the environment's maximum.
    slow = env.step(Call("python", {"code": "while True: pass", "timeout_s": 60}))
    assert slow.data["timed_out"] and "0.5 s" in slow.data["output"]
    assert env.final_state()["tool_calls"] == 2


@pytest.mark.parametrize("call, message", [
    (Call("search", {"query": "x"}), "unknown tool"),
    (Call("python", {"cmd": "print(1)"}), "unknown python argument"),
    (Call("python", {"code": "  "}), "non-empty string"),
    (Call("python", {"code": "print(1)", "timeout_s": "fast"}), "timeout_s"),
    (Call("python", {"code": "print(1)", "timeout_s": True}), "timeout_s"),
])
def test_bad_calls_come_back_as_error_data(call, message):
    env = MathEnvironment(EXAMPLE)
    obs = env.step(call)
    assert set(obs.data) == {"error"} and message in obs.data["error"]
    assert env.final_state() == {"tool_calls": 1, "tool_errors": 1}


def test_domain_builds_environments_with_its_limits(tmp_path):
    env = make_domain(tmp_path).environment(EXAMPLE)
    assert isinstance(env, MathEnvironment) and env.limits == ToolLimits()


def test_seed_harness_hooks():
    h = load_harness("harnesses/seeds/math_reasoning.py")
    assert (h.max_turns, h.token_budget) == (2, 512)
    prompt = h.start(MathEnvironment(EXAMPLE).reset())
    assert isinstance(prompt, Prompt) and prompt.max_new_tokens == 256
    text = prompt.messages[0]["content"]
    assert "\\boxed{}" in text and "What is 12345 * 6789?" in text and "```python" in text
    action = h.act("Let me compute.\n```python\nprint(12345 * 6789)\n```")
    assert action == Call("python", {"code": "print(12345 * 6789)\n"})
    shown = h.observe({"tool": "python", "output": "83810205\n", "ok": True, "timed_out": False})
    assert isinstance(shown, Prompt) and shown.messages == [{"role": "user", "content": "Output:\n83810205\n"}]
    # The last allowed turn ends the episode even if it holds code.
    assert isinstance(h.act("```python\nprint(1)\n```"), Finish)
    assert from_wire(to_wire(prompt)) == prompt


def test_seed_harness_finishes_without_code_and_relays_errors():
    h = load_harness("harnesses/seeds/math_reasoning.py")
    h.start({"question": "q", "tools": {}})
    assert h.observe({"error": "unknown tool 'x'"}).messages[0]["content"] == "Error: unknown tool 'x'"
    assert isinstance(h.act("The answer is \\boxed{5}."), Finish)


def test_program_harness_episode_by_hand_earns_the_reward():
    """Scripted completions through the real environment and verifier (the engine's loop, inlined)."""
    h, env, domain = load_harness("harnesses/examples/math_program.py"), MathEnvironment(EXAMPLE), make_domain("data")
    prompt = h.start(env.reset())
    assert prompt.prefix == "```python\n" and prompt.stop == ["```"]
    messages = list(prompt.messages)
    completion = "print(12345 * 6789)\n```"
    messages.append({"role": "assistant", "content": prompt.prefix + completion})
    call = h.act(completion)
    assert call == Call("python", {"code": "print(12345 * 6789)", "timeout_s": 5})
    prompt = h.observe(env.step(call).data)
    assert prompt.prefix == "\\boxed{" and prompt.stop == ["}"] and "83810205" in prompt.messages[0]["content"]
    messages += prompt.messages + [{"role": "assistant", "content": prompt.prefix + "83810205}"}]
    assert isinstance(h.act("83810205}"), Finish)
    verdict = domain.verify(EXAMPLE, messages, env.final_state())
    assert verdict.reward == 1.0 and verdict.formatted


def test_program_harness_asks_for_a_fix_once_then_for_the_answer():
    h = load_harness("harnesses/examples/math_program.py")
    h.start({"question": "q", "tools": {}})
    assert isinstance(h.act("```python\nprint(1/0)\n```"), Call)  # prefix included or not: same code
    retry = h.observe({"tool": "python", "output": "ZeroDivisionError", "ok": False, "timed_out": False})
    assert retry.prefix == "```python\n" and "ZeroDivisionError" in retry.messages[0]["content"]
    assert isinstance(h.act("print(2)\n```"), Call)
    answer = h.observe({"tool": "python", "output": "Traceback", "ok": False, "timed_out": False})
    assert answer.prefix == "\\boxed{"
    assert isinstance(h.act("2}"), Finish)


def test_program_harness_shows_the_end_of_a_long_output():
    h = load_harness("harnesses/examples/math_program.py")
    h.start({"question": "q", "tools": {}})
    h.act("print(list(range(2000)))\n```")
    output = ", ".join(str(i) for i in range(2000)) + "\nanswer: 1999000"
    shown = h.observe({"tool": "python", "output": output, "ok": True, "timed_out": False}).messages[0]["content"]
    assert f"[first {len(output) - 600} characters not shown]" in shown and "answer: 1999000" in shown
    assert len(shown) < 800 and "1, 2, 3" not in shown


@pytest.mark.parametrize("relative", ["harnesses/seeds/math_reasoning.py", "harnesses/examples/math_program.py",
                                      "harnesses/examples/math_expression.py"])
def test_harnesses_load_under_the_sandbox_rules(relative):
    worker = pytest.importorskip("harnesses._worker")
    import harnesses.contract as contract

    cls = worker.load_harness((ROOT / relative).read_text(), contract)
    assert isinstance(cls().start({"question": "q", "tools": {"python": "d"}}), Prompt)


def test_expression_harness_episode_by_hand_earns_the_reward_by_choosing_the_printed_value():
    """Scripted completions through the real environment and verifier: one line of Python, then
    the answer chosen among the integers it printed."""
    h = load_harness("harnesses/examples/math_expression.py")
    env, domain = MathEnvironment(EXAMPLE), make_domain("data")
    prompt = h.start(env.reset())
    assert prompt.prefix == "```python\nanswer = " and prompt.stop == ["\n", "```"]
    messages = list(prompt.messages)
    completion = prompt.prefix + "12345 * 6789\n"
    messages.append({"role": "assistant", "content": completion})
    call = h.act(completion)
    assert call == Call("python", {"code": "12345 * 6789", "timeout_s": 5})
    prompt = h.observe(env.step(call).data)
    assert prompt.prefix == "\\boxed{" and prompt.choices == ["83810205}"]
    messages += prompt.messages + [{"role": "assistant", "content": prompt.prefix + "83810205}"}]
    assert isinstance(h.act("83810205}"), Finish)
    verdict = domain.verify(EXAMPLE, messages, env.final_state())
    assert verdict.reward == 1.0 and verdict.formatted


@pytest.mark.parametrize(("output", "ok", "choices"), [
    ("102805274.0\n", True, ["102805274}"]),  # an integer-valued float is an integer
    ("[1, 2, 3]\n", True, None),  # no word of the output is an integer: the model writes the answer
    ("2.5\n", True, None),
    ("7\nTraceback ...\nNameError: x\n", False, None),  # a failed program offers nothing to choose
    ("1 2 3 1\n", True, ["1}", "3}", "2}"]),  # the last printed first, each once
    ("9" * 400 + " 42\n", True, ["42}"]),  # the number cut at the start of what is shown is left out
])
def test_expression_harness_offers_the_printed_integers_else_a_free_answer(output, ok, choices):
    h = load_harness("harnesses/examples/math_expression.py")
    h.start({"question": "q", "tools": {}})
    assert isinstance(h.act("```python\nanswer = f(1)\n"), Call)
    answer = h.observe({"tool": "python", "output": output, "ok": ok, "timed_out": False})
    assert answer.prefix == "\\boxed{" and answer.choices == choices
    assert answer.stop == ([] if choices else ["}"])
    assert len(answer.messages[0]["content"]) < 500


def test_expression_harness_ends_on_an_empty_line():
    h = load_harness("harnesses/examples/math_expression.py")
    h.start({"question": "q", "tools": {}})
    assert isinstance(h.act("```python\nanswer = \n"), Finish)
