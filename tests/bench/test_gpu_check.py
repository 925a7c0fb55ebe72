"""bench/gpu_check.py, the GPU check's script, run end to end on CPU against `whale serve`: it must
stay runnable for the day a device is lent (bench/gpu_check.sh runs it against vLLM)."""
import json
import subprocess
import sys

import pytest

from whale.testing import ROOT


@pytest.mark.slow
def test_the_gpu_check_runs_on_cpu_against_whale_serve(tiny_model_dir):
    out = subprocess.run([sys.executable, "bench/gpu_check.py", "--model", str(tiny_model_dir), "--prompts", "4",
                          "--new-tokens", "8", "--rollouts", "4", "--lr", "1e-3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    fp = report["fingerprint"]
    # the restarted server serves the trained weights (within the tolerance), not the old ones
    assert fp["gap_after"] <= fp["tol"] < fp["served_vs_old_weights"] and fp["resolves"]
    assert report["server_tok_per_s"] > 0 and report["transformers_tok_per_s"] > 0 and report["sft_step_s"] > 0
