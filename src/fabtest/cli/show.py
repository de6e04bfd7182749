"""``fabtest show``: the console summary of a stored experiment."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from fabtest.cli.common import EXIT_OK, fail, results_dir_of, shown
from fabtest.experiment.reader import ExperimentFileError, read_document

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_show(args: argparse.Namespace) -> int:
    from fabtest.experiment.robustness import attach_robustness
    from fabtest.report.console import previous_experiment_id, render_summary

    results_dir = results_dir_of(args)
    try:
        path, doc = read_document(args.experiment, results_dir)
        doc = attach_robustness(doc, path.parent)  # fabtest rejudge --perturb's audit, when there is one
        text = render_summary(doc, path, previous_experiment_id(path.parent, doc["experiment"]["id"]))
    except ExperimentFileError as exc:
        return fail(str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        return fail(f"malformed experiment file ({type(exc).__name__}: {exc})")
    sys.stdout.write(shown(text))
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest show``."""
    p = sub.add_parser("show", help="print the summary of a stored experiment")
    p.add_argument("experiment", metavar="ID", help="experiment id, unique prefix, or path")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_show)
