"""``fabtest rejudge`` and ``fabtest calibrate``: argument handling, the judge LLM and exit codes.

The judge is built from ``[tool.fabtest.judge]`` of ./pyproject.toml (plus ``FABTEST_*`` env) as a
test run would build it, with ``--judge-model`` to try another model on the same transcripts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fabtest.errors import UsageError
from fabtest.llm.base import LLM, LLMError, LLMNotConfigured

if TYPE_CHECKING:
    from fabtest.config.settings import Settings

__all__ = ["add_calibrate_args", "add_rejudge_args", "configured_llm", "fail", "judge_llm", "load_experiment",
           "run_calibrate", "run_rejudge"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> int:
    """Print a usage error as one line and return exit code 2."""
    print(f"fabtest: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def load_experiment(ref: str, results_dir: str, scenario: str | None = None) -> tuple[Any, list[Any], dict[str, Any]]:
    """The experiment ``ref`` (info, results, raw document); UsageError for a missing or bad file,
    or a ``scenario`` (id, id prefix or name) it does not have."""
    from fabtest.experiment.export import ExperimentFileError, load_document

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


def judge_llm(judge_model: str | None) -> LLM:
    """The judge LLM as ./pyproject.toml configures it (``judge_model`` overrides the model)."""
    from fabtest.config.settings import Settings

    return configured_llm(Settings.load(Path.cwd()), Path.cwd(), "judge", judge_model)


def configured_llm(settings: Settings, root: Path, role: Literal["judge", "simulator"],
                   model: str | None = None) -> LLM:
    """The judge or simulator LLM as ``settings`` configure it (``model`` overrides the model);
    raises LLMNotConfigured without credentials."""
    from fabtest.engine import llms

    # `offline_llm = "tests.fakes:judge"` names a module of the project: importable from the project
    # root, as under pytest and `fabtest run`, without PYTHONPATH=.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return llms.configured_llm(settings, root, role, model=model)


def _times_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 3)") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"out of range: {text} (from 1 to 50)")
    return value


def add_rejudge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="EXP", help="experiment id, unique prefix, or path")
    p.add_argument("--times", type=_times_arg, default=None,
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
        new_results, rows = rejudge_experiment(results, llm, times=args.times, criterion=args.criterion,
                                               scenario=args.scenario, files_dir=Path(results_dir),
                                               progress=lambda line: print(f"re-judging {line}", file=sys.stderr))
    except (UsageError, LLMNotConfigured) as exc:
        return fail(str(exc))
    except LLMError as exc:
        return fail(f"the judge failed: {exc}")
    table = agreement_table(rows)
    new_id = None
    if rows and not args.no_save:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new_info = rejudged_info(info, new_experiment_id(), stamp, (llm.provider, llm.model), args.times)
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


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", nargs="?", help="labelled examples (YAML or JSON)")
    p.add_argument("--from-features", nargs="*", metavar="PATH", default=None,
                   help="take the labelled examples from criteria 'with examples' in these feature files or "
                        "directories (default: features/)")
    p.add_argument("--times", type=_times_arg, default=1, help="verdicts per example; above 1 also reports "
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
