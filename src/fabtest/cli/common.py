"""What every command shares: where the results are, how an error is said, how text from results
files reaches the terminal, and the experiment a command works on.

One way to say a usage error (one line on stderr, exit 2, escape codes shown rather than obeyed)
keeps every command's bad input alike (docs/reference/exit-codes.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from fabtest._internal.redaction import redact
from fabtest._internal.terminal import inert
from fabtest.errors import UsageError

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["EXIT_ERROR", "EXIT_GATE", "EXIT_OK", "SubParsers", "default_results_dir", "experiment_to_rejudge", "fail",
           "load_experiment", "results_dir_of", "shown"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2


def default_results_dir() -> str:
    """``FABTEST_RESULTS_DIR``, else ``[tool.fabtest] results_dir`` of ./pyproject.toml, else results."""
    env = os.environ.get("FABTEST_RESULTS_DIR")
    if env:
        return env
    try:
        import tomllib

        with open("pyproject.toml", "rb") as handle:
            value = tomllib.load(handle).get("tool", {}).get("fabtest", {}).get("results_dir")
        if isinstance(value, str) and value:
            return value
    except (OSError, ValueError):
        pass
    return "results"


def results_dir_of(args: argparse.Namespace) -> str:
    """The command's ``--results-dir``, else :func:`default_results_dir`."""
    return args.results_dir or default_results_dir()


def fail(message: str, prog: str = "fabtest") -> int:
    """Print a usage error as one line and return exit code 2."""
    print(inert(f"{prog}: error: {message}"), file=sys.stderr)  # a file name may hold escape codes
    return EXIT_ERROR


def shown(text: str) -> str:
    """Text from results files for the terminal: secrets redacted (a file written by an older fabtest
    or another tool may hold the LLM key this process holds), escape codes shown, not obeyed."""
    return inert(redact(text))


def load_experiment(ref: str, results_dir: str, scenario: str | None = None) -> tuple[Any, list[Any], dict[str, Any]]:
    """The experiment ``ref`` (info, results, raw document); UsageError for a missing or bad file,
    or a ``scenario`` (id, id prefix or name) it does not have."""
    from fabtest.experiment.reader import ExperimentFileError, load_document

    try:
        info, results, doc = load_document(ref, results_dir)
    except ExperimentFileError as exc:
        raise UsageError(str(exc)) from None
    if scenario and not any(r.id.startswith(scenario) or r.name == scenario for r in results):
        raise UsageError(f"--scenario {scenario!r}: no scenario of {info.id} has that id or name")
    return info, results, doc


def experiment_to_rejudge(args: Any, results_dir: str) -> tuple[Any, list[Any]]:
    """The experiment and results ``rejudge`` (with or without ``--perturb``) asks about; UsageError
    for a bad experiment, scenario, or a ``--criterion`` it never judged."""
    info, results, _doc = load_experiment(args.experiment, results_dir, args.scenario)
    if args.criterion and not any(c.criterion == args.criterion for r in results
                                  for c in [*r.evaluations, *r.expectations] if c.type == "satisfy"):
        raise UsageError(f"--criterion {args.criterion!r}: {info.id} has no 'satisfy' check of that criterion")
    return info, results
