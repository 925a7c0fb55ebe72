"""`whale serve` containment against the real server on loopback: /v1/load only when enabled and
only under data/ and runs/, and every request bounded (body, n, max_tokens, prompt) before any work."""
from __future__ import annotations

import http.client
import json
import shutil
import socket

import httpx
import pytest

from whale.cli import parser
from whale.model import weights_id
from whale.rollout.serve import make_server
from whale.rollout.serve_checks import MAX_N, ServeLimits, is_loopback


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    (project / "data").mkdir()
    (project / "runs").mkdir()
    return project / "data", project / "runs"


@pytest.fixture(scope="module")
def server(tiny_model_dir, roots):
    srv = make_server(str(tiny_model_dir), allow_load=True, load_roots=roots).start()
    yield srv
    srv.stop()


def _post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=60)


def _message(reply: httpx.Response) -> str:
    return reply.json()["error"]["message"]


def _raw_post(server, headers: dict, path: str = "/v1/completions") -> http.client.HTTPResponse:
    """A POST whose headers are sent and whose body never is: the server must answer from the headers."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.putrequest("POST", path, skip_accept_encoding=True)
    for key, value in headers.items():
        conn.putheader(key, value)
    conn.endheaders()
    return conn.getresponse()


def test_load_is_refused_on_a_server_started_without_allow_load(tiny_model_dir, roots):
    srv = make_server(str(tiny_model_dir), load_roots=roots).start()  # allow_load defaults to off
    try:
        ckpt = roots[1] / "no-load"
        shutil.copytree(tiny_model_dir, ckpt)
        reply = _post(srv, "/load", {"model_dir": str(ckpt)})
        # 404 as on vLLM: OpenAIBackend then accepts a server already started on the checkpoint
        assert reply.status_code == 404 and "--allow-load" in _message(reply)
    finally:
        srv.stop()


def test_load_reads_only_under_data_and_runs(server, tiny_model_dir, roots, tmp_path):
    data, runs = roots
    outside = tmp_path / "outside"
    shutil.copytree(tiny_model_dir, outside)
    (runs / "escape").symlink_to(outside, target_is_directory=True)
    for model_dir in (outside, runs / "escape", runs / ".." / ".." / outside.relative_to(runs.parent.parent)):
        reply = _post(server, "/load", {"model_dir": str(model_dir)})
        assert reply.status_code == 403 and "outside the directories" in _message(reply), model_dir
    (runs / "empty").mkdir()
    assert _post(server, "/load", {"model_dir": str(runs / "empty")}).status_code == 400  # no weights
    ckpt = data / "ckpt"
    shutil.copytree(tiny_model_dir, ckpt)
    reply = _post(server, "/load", {"model_dir": str(ckpt)})
    assert reply.status_code == 200 and reply.json()["weights_id"] == weights_id(ckpt)


def test_n_is_capped(server):
    ok = _post(server, "/completions", {"prompt": [1, 2], "max_tokens": 1, "n": 2})
    assert ok.status_code == 200 and len(ok.json()["choices"]) == 2
    too_many = _post(server, "/completions", {"prompt": [1, 2], "max_tokens": 1, "n": MAX_N + 1})
    assert too_many.status_code == 400 and f"at most {MAX_N}" in _message(too_many)
    prompts = _post(server, "/completions", {"prompt": [[1, 2]] * 5, "max_tokens": 1, "n": 4})
    assert prompts.status_code == 400 and "20 completions" in _message(prompts)
    for bad in ("2", 2.5, True, -1):
        assert _post(server, "/completions", {"prompt": [1, 2], "n": bad}).status_code == 400, bad
    chat = _post(server, "/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 99})
    assert chat.status_code == 400


def test_malformed_fields_are_refused_with_a_reason_not_a_crash(server):
    ok = {"prompt": [1, 2], "max_tokens": 1}
    bad = [{"seed": 2**70}, {"seed": -1}, {"seed": "7"}, {"seed": 1.5}, {"temperature": "nan"},
           {"temperature": float("nan")}, {"temperature": float("inf")}, {"temperature": -0.5}, {"top_p": 0},
           {"top_p": 1.5}, {"top_k": 2.5}, {"top_k": "5"}, {"structured_outputs": ["a"]},
           {"structured_outputs": "choice"}, {"structured_outputs": {"choice": "ab"}},
           {"structured_outputs": {"choice": []}}, {"guided_choice": 3}]
    for fields in bad:  # sent as Python's json writes them: NaN and Infinity included
        reply = httpx.post(f"{server.base_url}/completions", content=json.dumps({**ok, **fields}),
                           headers={"Content-Type": "application/json"}, timeout=60)
        assert reply.status_code == 400 and _message(reply), (fields, reply.status_code, reply.text)
    assert _post(server, "/completions", {**ok, "seed": 2**62, "temperature": 0.0, "top_p": 1}).status_code == 200


def test_max_tokens_is_capped_by_the_context(server):
    reply = _post(server, "/completions", {"prompt": [1, 2], "max_tokens": server.context_len + 1})
    assert reply.status_code == 400 and f"at most {server.context_len}" in _message(reply)
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 10**9}
    assert _post(server, "/chat/completions", chat).status_code == 400


def test_too_long_prompts_are_refused_before_tokenising(server, tokenizer):
    context = server.context_len
    ids = _post(server, "/completions", {"prompt": [1] * (context + 1), "max_tokens": 1})
    assert ids.status_code == 400 and f"{context + 1} token ids" in _message(ids)
    text = _post(server, "/completions", {"prompt": "x" * (4 * context + 1), "max_tokens": 1})
    assert text.status_code == 400 and "before tokenising" in _message(text)
    listed = _post(server, "/completions", {"prompt": ["hi", "x" * (4 * context + 1)], "max_tokens": 1})
    assert listed.status_code == 400 and "characters" in _message(listed)
    chat = {"messages": [{"role": "user", "content": "x" * (4 * context + 1)}], "max_tokens": 1}
    assert _post(server, "/chat/completions", chat).status_code == 400
    # within the character cap but over the context once tokenised: the token check still holds
    digits = "7" * (2 * context)  # one token per digit
    assert len(tokenizer.encode(digits)) > context
    fits = _post(server, "/completions", {"prompt": digits, "max_tokens": 1})
    assert fits.status_code == 400 and "exceeds the model's context" in _message(fits)


def test_oversized_body_is_refused_from_its_header(server):
    reply = _raw_post(server, {"Content-Type": "application/json", "Content-Length": str(16 << 20)})
    assert reply.status == 413 and reply.getheader("Connection") == "close"
    assert "at most 1048576" in reply.read().decode()
    assert _raw_post(server, {"Content-Type": "application/json"}).status == 411  # no Content-Length
    assert _raw_post(server, {"Transfer-Encoding": "chunked"}).status == 411
    assert _raw_post(server, {"Content-Length": "12abc"}).status == 400
    assert _raw_post(server, {"Content-Length": str(16 << 20)}, path="/v1/load").status == 413
    assert httpx.get(f"{server.base_url}/models").status_code == 200  # still serving


def test_oversized_body_is_refused_before_100_continue(server):
    with socket.create_connection(server.server_address[:2], timeout=30) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 16777216\r\nExpect: 100-continue\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):  # the whole answer: the server closes the connection after it
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413") and b"at most 1048576" in reply  # no "100 Continue" first


def test_limits_are_parameters(tiny_model_dir):
    srv = make_server(str(tiny_model_dir), limits=ServeLimits(max_n=2, max_body_bytes=100, max_tokens=3)).start()
    try:
        assert _post(srv, "/completions", {"prompt": [1, 2], "max_tokens": 1, "n": 3}).status_code == 400
        assert _post(srv, "/completions", {"prompt": [1, 2], "max_tokens": 4}).status_code == 400
        assert _post(srv, "/completions", {"prompt": [1, 2], "max_tokens": 3, "n": 2}).status_code == 200
        assert _raw_post(srv, {"Content-Length": "101"}).status == 413
    finally:
        srv.stop()
    with pytest.raises(ValueError, match="positive"):
        ServeLimits(max_n=0)


def test_loopback_by_default():
    args = parser().parse_args(["serve"])
    assert (args.host, args.allow_load, args.max_n, args.max_body_mb) == ("127.0.0.1", False, MAX_N, 1.0)
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.com"))
