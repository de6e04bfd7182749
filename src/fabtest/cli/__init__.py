"""Command line: ``fabtest COMMAND`` and ``fabtest-compare``, one module per command.

Each command's module adds its sub-parser in ``register(sub)`` (with ``set_defaults(func=...)``,
the function that runs it); :func:`main` is only the table of those modules, in the order
``fabtest --help`` lists them. Exit codes: docs/reference/exit-codes.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fabtest._internal.redaction import register_llm_keys
from fabtest.cli import (
    ab,
    calibrate,
    compare,
    faults,
    generate,
    import_conversation,
    init,
    listing,
    merge,
    mutate,
    recover,
    rejudge,
    replay,
    report,
    run,
    score,
    show,
    shrink,
    steps,
    view,
)
from fabtest.cli.compare import compare_main

__all__ = ["COMMANDS", "compare_main", "main"]

#: every ``fabtest`` command, in the order of ``fabtest --help``
COMMANDS = (init, listing, show, report, compare, ab, view, recover, merge, steps, rejudge, calibrate, replay, mutate,
            faults, generate, import_conversation, score, shrink, run)


def main(argv: Sequence[str] | None = None) -> int:
    """``fabtest init | list | show | report | view | compare | ab | recover | rejudge | calibrate | replay | mutate
    | import | score | shrink | faults | run | steps``."""
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw and raw[0] == "run":  # the playbook runner parses its own options (argparse REMAINDER can't)
        return run.run_command(raw[1:])
    parser = argparse.ArgumentParser(prog="fabtest", description="fabtest experiments and playbooks.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.register(sub)
    args = parser.parse_args(raw)
    register_llm_keys()  # what any command prints and writes never shows the LLM keys this process holds
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
