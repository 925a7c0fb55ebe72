"""The sandboxed Python tool: output, limits, isolation. Each run is a real child process."""
from __future__ import annotations

import socket

import pytest

from domains.math_reasoning.pytool import extract_code, run_python, show_last_expression


def test_prints_output():
    assert run_python("print(3**200 % 17)", 5) == {"output": "16\n", "ok": True, "timed_out": False}


def test_first_python_block_and_last_expression_are_used():
    text = "Let me compute.\n```python\nx = 12345\nx * 6789\n```\nand\n```python\nprint('second')\n```"
    result = run_python(text, 5)
    assert result["ok"] and result["output"] == "83810205\n"


def test_last_expression_rule_follows_the_syntax_tree():
    assert show_last_expression("x = 1") == "x = 1"
    assert show_last_expression("for i in range(2):\n    i") == "for i in range(2):\n    i"
    assert show_last_expression("print(1)") == "print(1)"
    assert run_python("def f():\n    print('inside')\nf()", 5)["output"] == "inside\n"  # None not shown
    assert run_python("a = 'é'; a * 2  # note", 5)["output"] == "éé\n"
    assert extract_code("no fence") == "no fence"


def test_empty_output_and_errors_are_reported():
    assert run_python("x = 1", 5) == {"output": "[no output]", "ok": True, "timed_out": False}
    result = run_python("1/0", 5)
    assert not result["ok"] and "ZeroDivisionError" in result["output"] and 'File "main.py"' in result["output"]
    assert run_python("import sys; sys.exit(3)", 5)["output"] == "[exit status 3]"


def test_infinite_loop_times_out():
    result = run_python("print('start')\nwhile True:\n    pass", 0.5)
    assert result == {"output": "start\n\n[timed out after 0.5 s]", "ok": False, "timed_out": True}


def test_memory_bomb_is_contained():
    result = run_python("x = bytearray(2 * 1024**3)\nprint('allocated')", 5, memory_mb=256)
    assert not result["ok"] and not result["timed_out"]
    assert "MemoryError" in result["output"] and "allocated" not in result["output"]


def test_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    result = run_python("import os\nprint(sorted(os.environ))\nprint('ANTHROPIC_API_KEY' in os.environ)", 5)
    assert result["ok"] and "False" in result["output"] and "sk-secret" not in result["output"]


def test_socket_connect_fails():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        result = run_python(code, 5)
    assert not result["ok"] and "connected" not in result["output"]


def test_files_outside_the_scratch_directory_are_refused(tmp_path):
    secret = tmp_path / "gold.jsonl"
    secret.write_text('{"answer": "gold-q7zx"}')  # a value no temporary path contains (pytest-142 holds 42)
    read = run_python(f"print(open({str(secret)!r}).read())", 5)
    assert not read["ok"] and "gold-q7zx" not in read["output"] and "PermissionError" in read["output"]
    write = run_python(f"open({str(tmp_path / 'new.txt')!r}, 'w').write('x')", 5)
    assert not write["ok"] and not (tmp_path / "new.txt").exists()
    assert run_python("open('scratch.txt', 'w').write('ok')\nprint(open('scratch.txt').read())", 5)["output"] == "ok\n"


def test_subprocesses_are_refused():
    result = run_python("import os\nos.system('echo ' + 'ESC'.lower() + 'aped')", 5)
    assert not result["ok"] and "escaped" not in result["output"] and "PermissionError" in result["output"]


def test_output_is_truncated():
    result = run_python("for i in range(100000):\n    print('line', i)", 5, output_limit=200)
    assert len(result["output"]) == 200 and result["output"].endswith("[output truncated]")
    assert result["output"].startswith("line 0\nline 1\n")


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        run_python("print(1)", 0)
    with pytest.raises(TypeError):
        run_python(None, 1)
