"""``fabtest rejudge``: an experiment's recorded transcripts judged again, and how often the verdicts agree.

The judge is built from ``[tool.fabtest.judge]`` of ./pyproject.toml (plus ``FABTEST_*`` env) as a
test run would build it, with ``--judge-model`` to try another model on the same transcripts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fabtest.cli import perturb
from fabtest.cli.common import EXIT_OK, experiment_to_rejudge, fail, results_dir_of
from fabtest.cli.llms import judge_llm
from fabtest.errors import UsageError
from fabtest.llm.base import LLMError, LLMNotConfigured

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["add_rejudge_args", "register", "run_rejudge", "times_arg"]


def times_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 3)") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"out of range: {text} (from 1 to 50)")
    return value


def add_rejudge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="EXP", help="experiment id, unique prefix, or path")
    p.add_argument("--times", type=times_arg, default=None,
                   help="how many times to ask the judge (default 3; with --perturb, per perturbation: default 1)")
    p.add_argument("--criterion", default=None, help="re-judge only this criterion")
    p.add_argument("--scenario", default=None, help="re-judge only this scenario (id, id prefix or name)")
    p.add_argument("--judge-model", default=None, help="another judge model (same provider) for the re-judging")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-save", action="store_true", help="do not write the re-judged experiment (or the audit)")
    p.add_argument("--results-dir", default=None)
    p.add_argument("--perturb", action="store_true",
                   help="criterion robustness audit: re-judge under reworded criteria, rotated examples, the context "
                        "removed (and --perturb-model); report how often each criterion's verdict moves")
    p.add_argument("--perturb-model", default=None, metavar="MODEL",
                   help="with --perturb: also ask this judge model (same provider)")
    p.add_argument("--max-move", type=_share_arg, default=None, metavar="SHARE",
                   help="with --perturb: flag a criterion whose verdict moves in more than this share of its "
                        "perturbed judgements (default 0.2)")


def _share_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.2)") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"out of range: {text} (a share from 0 to below 1, e.g. 0.2)")
    return value


def run_rejudge(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.config.settings import Settings
    from fabtest.experiment.export import new_experiment_id
    from fabtest.experiment.spool import write_experiment
    from fabtest.judging.rejudge import agreement_table, rejudge_experiment, rejudged_info
    from fabtest.judging.render import render_rejudge_text

    if args.perturb_model or args.max_move is not None:
        return fail("--perturb-model and --max-move go with --perturb")
    args.times = args.times or 3
    try:
        info, results = experiment_to_rejudge(args, results_dir)
    except UsageError as exc:
        return fail(str(exc))
    try:
        llm = judge_llm(args.judge_model)
        settings = Settings.load(Path.cwd())
        # the judge sees the run's files again (results/files), each inline up to judge_max_file_bytes
        new_results, rows = rejudge_experiment(results, llm, times=args.times, criterion=args.criterion,
                                               scenario=args.scenario, files_dir=Path(results_dir),
                                               max_file_bytes=settings.judge_max_file_bytes,
                                               progress=lambda line: print(f"re-judging {line}", file=sys.stderr))
    except (UsageError, LLMNotConfigured) as exc:
        return fail(str(exc))
    except LLMError as exc:
        return fail(f"the judge failed: {exc}")
    table = agreement_table(rows)
    new_id = None
    if rows and not args.no_save:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new_info = rejudged_info(info, new_experiment_id(), stamp, (llm.provider, llm.model), args.times,
                                 settings.judge.temperature, settings.judge_max_file_bytes)
        section = {"of": info.id, "times": args.times, "criterion": args.criterion, "scenario": args.scenario,
                   "agreement": table, "checks": [r.to_dict() for r in rows]}
        write_experiment(new_info, new_results, results_dir, {"rejudge": section})
        new_id = new_info.id
    if args.format == "json":
        sys.stdout.write(json.dumps({"of": info.id, "rejudged_experiment": new_id, "times": args.times,
                                     "agreement": table, "checks": [r.to_dict() for r in rows]}, indent=2) + "\n")
    else:
        sys.stdout.write(render_rejudge_text(table, source=info.id, new_id=new_id, times=args.times))
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """``fabtest rejudge`` (``--perturb``: the robustness audit of cli/perturb.py)."""
    p = sub.add_parser("rejudge", help="re-judge an experiment's recorded transcripts: is the judge consistent?")
    add_rejudge_args(p)
    p.set_defaults(func=lambda a: (perturb.run_perturb if a.perturb else run_rejudge)(a, results_dir_of(a)))
