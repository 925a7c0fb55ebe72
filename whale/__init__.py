"""WHALE: weight-harness alternating learning. Shared machinery (no Prefect imports here)."""
