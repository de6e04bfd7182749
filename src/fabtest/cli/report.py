"""``fabtest report``: an experiment"s self-contained HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest._internal.files import write_text_atomic
from fabtest._internal.redaction import redact
from fabtest.cli.common import EXIT_OK, fail, results_dir_of
from fabtest.experiment.reader import ExperimentFileError, read_document

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_report(args: argparse.Namespace) -> int:
    from fabtest.experiment.robustness import attach_robustness
    from fabtest.report.html import render_experiment_html

    results_dir = results_dir_of(args)
    try:
        path, doc = read_document(args.experiment, results_dir)
        html = render_experiment_html(attach_robustness(doc, path.parent))
    except ExperimentFileError as exc:
        return fail(str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        return fail(f"malformed experiment file ({type(exc).__name__}: {exc})")
    out = Path(args.output) if args.output else path.with_suffix(".html")
    try:
        write_text_atomic(out, redact(html))
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    print(f"Report written to: {out}")
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest report``."""
    p = sub.add_parser("report", help="write the self-contained HTML report of an experiment")
    p.add_argument("experiment", metavar="ID", help="experiment id, unique prefix, or path")
    p.add_argument("-o", "--output", default=None, help="output file (default: results/<id>.html)")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_report)
