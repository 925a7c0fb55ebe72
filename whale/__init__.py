"""WHALE: weight-harness alternating learning. Shared machinery (no Prefect imports here)."""
import os

# MKL's strict reproducible mode: the same RSFT steps give bit-identical weights whatever the
# thread count (without it, MKL splits some products by thread count on AVX-512 machines). Read
# when MKL starts, so it is set on import, before any matrix product; MKL_CBWR=AUTO turns it off
# (the cost: bench/mkl_cbwr.py, docs/benchmarks.md).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
