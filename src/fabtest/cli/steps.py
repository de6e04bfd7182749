"""``fabtest steps``: the step vocabulary, built-in and the project"s own, one example each."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest.cli.common import EXIT_OK, fail

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register"]


def _cmd_steps(args: argparse.Namespace) -> int:
    from fabtest.pytest_plugin.vocabulary import collect_steps, collection_errors, render_steps

    paths = list(args.paths) or (["features"] if Path("features").is_dir() else ["."])
    steps, code, output = collect_steps(paths)
    errors = collection_errors(output)
    if code not in (0, 5) and not (steps and errors):  # 5: nothing collected, which still lists the built-in steps
        tail = errors or [line for line in output.splitlines() if line.strip()][-15:]
        sys.stderr.write("\n".join(tail) + "\n")
        return fail(f"pytest could not collect {' '.join(paths)} (exit code {code}); see above", "fabtest steps")
    sys.stdout.write(render_steps(steps))
    if errors:  # a feature that does not collect hides none of the vocabulary, only its own example lines
        sys.stderr.write("fabtest steps: warning: some files did not collect (a step no definition matches, "
                         "or a file that gives no example lines):\n"
                         + "\n".join(f"  {line}" for line in errors) + "\n")
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest steps``."""
    p = sub.add_parser("steps", help="list the step vocabulary (built-in and the project's own), one example each")
    p.add_argument("paths", nargs="*", metavar="PATH", help="what pytest collects to find the project's steps "
                                                            "(default: features/ if it exists, else .)")
    p.set_defaults(func=_cmd_steps)
