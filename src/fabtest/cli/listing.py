"""``fabtest list``: the stored experiments, one line each, and the files that are not experiments."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fabtest._internal.terminal import inert
from fabtest.cli.common import EXIT_OK, results_dir_of, shown
from fabtest.experiment.reader import ExperimentFileError, list_experiment_files, read_document

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from fabtest.experiment.fmt import pct

    results_dir = results_dir_of(args)
    rows: list[list[Any]] = []
    skipped: list[str] = []
    for path in list_experiment_files(results_dir):
        try:
            _, doc = read_document(path, results_dir, lean=True)
        except ExperimentFileError as exc:
            print(inert(f"fabtest: warning: skipping {exc}"), file=sys.stderr)
            skipped.append(str(exc))
            continue
        exp, summary = doc["experiment"], doc["summary"]
        git = (exp.get("git_commit") or "")[:8] + ("*" if exp.get("git_dirty") else "")
        name = exp.get("name") or ""
        if exp.get("interrupted"):
            name += " (interrupted)"
        rows.append([exp.get("id"), exp.get("timestamp"), name, summary.get("total_scenarios"),
                     pct(summary.get("completion_rate")), pct(summary.get("evaluation_rate")), git or "-"])
    if not rows:
        print(shown(f"No experiments in {results_dir}/"))
    else:
        print(shown(tabulate(rows, headers=["ID", "Timestamp", "Name", "Scenarios", "Completion", "Evaluation",
                                             "Git"])))
    print(shown(_skipped_files(skipped)), end="")
    return EXIT_OK


def _skipped_files(reasons: list[str], shown: int = 5) -> str:
    """The files ``fabtest list`` could not read, said in its own output too (not only as warnings
    on stderr, which a pipe or a CI log's collapsed section hides): a missing experiment has a cause."""
    if not reasons:
        return ""
    lines = [f"\n{len(reasons)} file(s) skipped: not readable as experiments (fabtest show <file> says why):"]
    lines += [f"  {reason}" for reason in reasons[:shown]]
    if len(reasons) > shown:
        lines.append(f"  ... and {len(reasons) - shown} more (each on stderr)")
    return "\n".join(lines) + "\n"


def register(sub: SubParsers) -> None:
    """``fabtest list``."""
    p = sub.add_parser("list", help="list stored experiments")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_list)
