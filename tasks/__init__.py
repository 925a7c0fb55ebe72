"""Prefect tasks: thin, typed, one verb each. The work is done by whale/ and harnesses/.

They take the live ``Run`` (model, store, trainer), which cannot be hashed, so Prefect's input
cache is off (``cache_policy=NONE``); caching and resume are by content keys in DuckDB instead:
a rollout batch, a score or a test evaluation whose key (harness id, weights id, step) is already
stored is read back, never recomputed.
"""
from prefect.exceptions import MissingContextError
from prefect.logging import get_logger, get_run_logger


def log(message: str) -> None:
    """Log to the current flow or task run (the Prefect UI and the console).

    The flow does not use ``log_prints``: it patches ``print`` for every library in the process,
    and dill (which datasets uses to fingerprint TRL's map functions) disassembles functions by
    capturing ``sys.stdout``; under the patch the disassembly lands in the run log instead.
    """
    try:
        logger = get_run_logger()
    except MissingContextError:  # called outside a run (a test, a script)
        logger = get_logger("whale")
    logger.info(message)
