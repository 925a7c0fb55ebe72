"""What MKL's strict reproducibility mode (``MKL_CBWR=AUTO,STRICT``, set by ``whale/__init__.py``)
costs: the RSFT step (``bench/sft.py``) and the transformers engine (``bench/engine.py``) on the real
model, each in a child process under each setting, alternating, ``--repeats`` times, in one run.

    .venv/bin/python bench/mkl_cbwr.py [--repeats 2] [--json runs/bench/mkl_cbwr.json]

Without the strict mode, MKL may split a matrix product differently for another thread count, and
the same RSFT steps then give other weights (``tests/train/test_sft.py`` checks 1 against 2 threads).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.vllm_engines import cpu_flags, emit  # noqa: E402

SETTINGS = {"strict": "AUTO,STRICT", "auto": "AUTO"}  # AUTO: MKL's fastest branch, results may vary by thread count
BENCHES = {
    "sft": [str(ROOT / "bench" / "sft.py"), "--steps", "3"],
    "engine": [str(ROOT / "bench" / "engine.py"), "--prompts", "16", "--new-tokens", "48", "--no-per-episode"],
}


def child(bench: str, setting: str) -> dict:
    env = {**os.environ, "MKL_CBWR": SETTINGS[setting]}

    def run(*extra: str) -> str:
        return subprocess.run([sys.executable, *BENCHES[bench], *extra], capture_output=True, text=True, cwd=ROOT,
                              env=env, check=True).stdout

    if bench == "engine":  # bench/engine.py reports in a JSON file
        with tempfile.TemporaryDirectory() as tmp:
            run("--json", f"{tmp}/engine.json")
            return {"tok_per_s": json.loads(Path(f"{tmp}/engine.json").read_text())["batched"]["tok_per_s"]}
    return json.loads([ln for ln in run().splitlines() if ln.startswith("{")][-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    print(f"CPU: {os.cpu_count()} cores, flags {cpu_flags()}", flush=True)
    rows: list[dict] = []
    for r in range(args.repeats):
        for bench in BENCHES:
            for setting in SETTINGS:
                emit({"repeat": r, "bench": bench, "mkl_cbwr": SETTINGS[setting],
                      **child(bench, setting)}, rows, Path(args.json) if args.json else None)


if __name__ == "__main__":
    main()
