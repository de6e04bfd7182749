"""``fabtest generate``: arguments, the judge-side LLM, and what is printed (README "Generating scenarios")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest.cli.common import fail, results_dir_of
from fabtest.errors import UsageError
from fabtest.llm.base import LLMError

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["add_generate_args", "register", "run_generate"]


def _count_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 5)") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"out of range: {text} (from 1 to 50)")
    return value


def add_generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--describe", default="", metavar="TEXT", help="what the agent is for, in a sentence or two")
    p.add_argument("--count", type=_count_arg, default=5, help="how many records to draft (default 5)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="the new scenario set to write (default scenarios/generated.yaml); never overwritten")
    p.add_argument("--from", dest="experiment", default=None, metavar="EXP",
                   help="the experiment whose coverage gaps to aim at (default: the latest; 'none' for none)")
    p.add_argument("--results-dir", default=None)


def run_generate(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.authoring.generate import declared_from, draft_records, write_records
    from fabtest.cli.llms import configured_llm
    from fabtest.config.settings import Settings

    root = Path.cwd()
    try:
        settings = Settings.load(root)
        out = Path(args.out) if args.out else root / settings.scenarios_dir / "generated.yaml"
        if out.exists():  # before paying for a call
            raise UsageError(f"{out} exists: fabtest generate never overwrites; pass --out with a new file name")
        experiment = _experiment(args.experiment, results_dir)
        declared = declared_from(settings.criteria, settings.topics, experiment, root / settings.scenarios_dir)
        llm = configured_llm(settings, root, "judge")
        records, dropped, notes = draft_records(llm, declared, description=args.describe, count=args.count)
        if not records:
            raise UsageError("every draft repeated an existing record; nothing written (" + "; ".join(dropped) + ")")
        path = write_records(records, out)
    except (UsageError, LLMError) as exc:
        return fail(str(exc))
    aimed = sorted({a for r in records for a in r.get("aims_at", [])})
    print(f"Wrote {len(records)} scenario record(s) to {path}" + (f", aimed at: {', '.join(aimed)}" if aimed else ""))
    for line in dropped:
        print(f"  dropped {line}")
    for line in notes:  # about a record that was written
        print(f"  written, in part: {line}")
    print(f"Review them, then run them with a scenario tagged @scenario_set:{path.stem} "
          "(Given a simulated user from the scenario).")
    return 0


def _experiment(ref: str | None, results_dir: str) -> dict[str, Any] | None:
    """The experiment whose coverage is aimed at: ``ref``, the latest one, or none."""
    from fabtest.experiment.reader import ExperimentFileError, list_experiment_files, read_document

    if ref == "none":
        return None
    if ref is None:
        files = list_experiment_files(results_dir)
        if not files:
            print("fabtest generate: no experiment yet: drafting from the declarations only "
                  "(run your features first to aim at what they never exercised)", file=sys.stderr)
            return None
        ref = str(files[-1])
    try:
        return read_document(ref, results_dir, lean=True)[1]
    except ExperimentFileError as exc:
        raise UsageError(str(exc)) from None


def register(sub: SubParsers) -> None:
    """``fabtest generate``."""
    p = sub.add_parser("generate", help="draft scenario-set records aimed at what the last run never exercised")
    add_generate_args(p)
    p.set_defaults(func=lambda a: run_generate(a, results_dir_of(a)))
