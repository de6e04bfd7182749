"""``fabtest recover``: the journals of interrupted runs turned into experiment files."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from fabtest._internal.terminal import inert
from fabtest.cli.common import EXIT_ERROR, EXIT_OK, results_dir_of

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_recover(args: argparse.Namespace) -> int:
    from fabtest.experiment.recorder import recover_pending

    results_dir = results_dir_of(args)
    done = recover_pending(results_dir)
    if not done:
        print(f"No interrupted experiments in {results_dir}/")
    failed = 0
    for _journal, path, error in done:
        if path is not None:
            print(f"Recovered (interrupted): {path}")
        else:
            failed += 1
            print(inert(f"fabtest: error: {error}"), file=sys.stderr)
    return EXIT_ERROR if failed else EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest recover``."""
    p = sub.add_parser("recover", help="turn journals of interrupted runs into experiment files")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_recover)
