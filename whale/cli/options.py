"""Options several commands share."""
from __future__ import annotations

import json


def add_set(p) -> None:
    p.add_argument("--set", default=None, help="JSON overrides of params.yaml, e.g. '{\"schedule\": {\"E\": 0.2}}'")


def overrides(args) -> dict | None:
    """The ``--set`` overrides (None without them)."""
    if not getattr(args, "set", None):
        return None
    try:
        return json.loads(args.set)
    except json.JSONDecodeError as e:
        raise ValueError(f"--set is not valid JSON: {e}") from None
