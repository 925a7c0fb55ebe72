"""The `whale` command line: one module per command, each with ``add_arguments`` and ``run``."""
from __future__ import annotations

import argparse
import signal
import sys
from importlib import import_module

from domains import NAMES
from whale.cli.options import overrides
from whale.run.settings import load_settings
from whale.run.stop import request_stop, stop_requested

# name -> (module under whale.cli, one-line help); a command's module is imported only when used.
COMMANDS = {
    "prepare": ("prepare", "generate a domain's weight/harness/test splits under data/"),
    "model": ("model", "model utilities"),
    "eval": ("eval", "roll out a harness on a split and report mean@k"),
    "run": ("run", "run (or resume) one condition on one domain as a Prefect flow"),
    "report": ("report", "offline HTML report (PNGs embedded), metrics.json and curves.csv of the runs"),
    "compare": ("compare", "conditions side by side: final test scores with paired 95 %% bootstrap intervals"),
    "harness": ("harness", "inspect a run's harness archive (read-only)"),
    "sql": ("sql", "query every run's DuckDB (tables attached per run; all_<table> views)"),
    "serve": ("serve", "OpenAI-compatible server over the transformers backend"),
}


def _module(name: str):
    return import_module(f"whale.cli.{COMMANDS[name][0]}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="whale", description="WHALE: weight-harness alternating learning")
    p.add_argument("--params", default="params.yaml", help="configuration file")
    p.add_argument("--profile", default=None, help="profile overlay from params.yaml (default: its `profile`)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, (_, help_) in COMMANDS.items():
        _module(name).add_arguments(sub.add_parser(name, help=help_))
    return p


def _stop(signum: int, frame) -> None:
    # Python's default SIGTERM ends the process on the spot: no finally, no atexit, so the
    # temporary Prefect server and the model server would outlive the run. Unwinding instead
    # runs them (Prefect's own handler records the crash first and then calls this one). The
    # request is also recorded: should something swallow the exit, the phases raise it again.
    request_stop(signum)
    raise SystemExit(128 + signum)


def _interrupt(signum: int, frame) -> None:
    # Ctrl-C as Python has it (KeyboardInterrupt), remembered like SIGTERM.
    request_stop(signum)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _stop)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        module = _module(args.cmd)
        domain = getattr(args, "domain", None)  # a run's domain selects its per_domain overlay
        settings = load_settings(args.params, args.profile, overrides(args), domain if domain in NAMES else None)
        module.run(args, settings)
    except (FileNotFoundError, ValueError) as e:
        print(f"whale: {e}", file=sys.stderr)
        return 2
    signum = stop_requested()
    if signum is not None:  # the exit was swallowed on its way up: the command did not finish as asked
        print(f"whale: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    return 0
