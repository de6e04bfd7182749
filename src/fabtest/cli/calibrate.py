"""``fabtest calibrate``: the judge against labelled examples, accuracy and Cohen's kappa.

The judge is built from ``[tool.fabtest.judge]`` of ./pyproject.toml (plus ``FABTEST_*`` env) as a
test run would build it, with ``--judge-model`` to try another model on the same examples.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest.cli.common import EXIT_GATE, EXIT_OK, fail
from fabtest.cli.llms import judge_llm
from fabtest.cli.rejudge import times_arg
from fabtest.errors import UsageError
from fabtest.llm.base import LLMError, LLMNotConfigured

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["add_calibrate_args", "register", "run_calibrate"]


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", nargs="?", help="labelled examples (YAML or JSON)")
    p.add_argument("--from-features", nargs="*", metavar="PATH", default=None,
                   help="take the labelled examples from criteria 'with examples' in these feature files or "
                        "directories (default: features/)")
    p.add_argument("--times", type=times_arg, default=1, help="verdicts per example; above 1 also reports "
                                                                 "the judge's self-agreement (default 1)")
    p.add_argument("--min-kappa", type=float, default=None, help="exit 1 if the overall kappa is below this")
    p.add_argument("--judge-model", default=None, help="another judge model (same provider)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def run_calibrate(args: argparse.Namespace) -> int:
    from fabtest.config.settings import Settings
    from fabtest.judging.calibrate import calibrate, calibration_report, examples_from_features, load_examples
    from fabtest.judging.render import render_calibration_text

    if (args.file is None) == (args.from_features is None):
        return fail("calibrate needs FILE or --from-features (one of them)")
    if args.min_kappa is not None and not -1 <= args.min_kappa <= 1:
        return fail(f"--min-kappa {args.min_kappa}: kappa lies between -1 and 1 (e.g. 0.6)")
    try:
        if args.file is not None:
            source = args.file
            examples = load_examples(Path(args.file), Settings.load(Path.cwd()).criteria)
        else:
            paths = [Path(p) for p in args.from_features] or [Path("features")]
            missing = [str(p) for p in paths if not p.exists()]
            if missing:
                return fail(f"--from-features: {', '.join(missing)} does not exist")
            source = " ".join(str(p) for p in paths)
            examples = examples_from_features(paths)
            if not examples:
                return fail(f"--from-features: no criterion 'with examples' (or Good:/Bad: lines) in {source}")
        llm = judge_llm(args.judge_model)
        judged = calibrate(examples, llm, times=args.times,
                           progress=lambda line: print(f"judging {line}", file=sys.stderr))
    except (UsageError, LLMNotConfigured) as exc:
        return fail(str(exc))
    except LLMError as exc:
        return fail(f"the judge failed: {exc}")
    report = calibration_report(judged, args.times)
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_calibration_text(report, source=source))
    kappa = report["overall"]["kappa"]
    if args.min_kappa is not None and (kappa is None or kappa < args.min_kappa):
        shown = "undefined (one label only)" if kappa is None else f"{kappa:.2f}"
        print(f"fabtest calibrate: gate failed: kappa {shown} is below --min-kappa {args.min_kappa}", file=sys.stderr)
        return EXIT_GATE
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest calibrate``."""
    p = sub.add_parser("calibrate", help="judge labelled examples: accuracy and Cohen's kappa against human verdicts")
    add_calibrate_args(p)
    p.set_defaults(func=run_calibrate)
