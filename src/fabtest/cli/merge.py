"""``fabtest merge``: the experiment parts of one sharded run combined into one experiment."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fabtest.cli.common import EXIT_OK, fail, results_dir_of

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_merge(args: argparse.Namespace) -> int:
    from fabtest.errors import UsageError
    from fabtest.experiment.merge import MergeError, merge_parts
    from fabtest.experiment.recorder import check_experiment_id

    try:
        check_experiment_id(args.output, "-o")
        path = merge_parts(args.parts, results_dir_of(args), args.output)
    except (MergeError, UsageError) as exc:
        return fail(str(exc), "fabtest merge")
    print(f"Merged {len(args.parts)} part(s) into {path}")
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest merge``."""
    p = sub.add_parser("merge", help="combine the experiment parts of one sharded run into one experiment")
    p.add_argument("parts", nargs="+", metavar="PART", help="experiment files (or ids) written by the shards")
    p.add_argument("-o", "--output", default=None, metavar="ID",
                   help="id of the merged experiment (default: the parts' id)")
    p.add_argument("--results-dir", default=None, help="where the merged <id>.json goes (and ids are looked up)")
    p.set_defaults(func=_cmd_merge)
