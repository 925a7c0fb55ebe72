"""Prefect flows: the one `whale` flow (flows/whale.py) built from the phases (flows/phases.py)."""
import os

# Without a server, each flow process starts a temporary one; on a busy 2-core machine it can take
# longer than Prefect's default wait. No usage analytics leave the machine.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
