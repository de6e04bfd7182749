"""``fabtest compare`` and ``fabtest-compare``: two experiments, what changed, and the gate.

Exit codes: 0 normally (a requested gate: not worse), 1 when a requested gate finds the current
experiment worse, 3 when it is undecided, 2 for usage errors and for missing, malformed or
ambiguous experiment files (a one-line message on stderr, never a traceback).
The gate is checked before anything is printed, so a bad ``--min-criterion`` name prints nothing
but its error.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal.files import write_text_atomic
from fabtest._internal.redaction import redact, register_llm_keys
from fabtest._internal.terminal import inert
from fabtest.cli.common import EXIT_OK, fail, results_dir_of, shown
from fabtest.experiment.reader import ExperimentFileError, read_document

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers
    from fabtest.compare.read import Experiment

__all__ = ["add_compare_args", "compare_main", "register"]


def _rate_arg(text: str) -> float:
    """``0.8`` or ``80%`` → 0.8. A bare number above 1 is refused: 1.5 could mean 1.5% or 150%."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a rate: {text!r} (use 0.8 or 80%)") from None
    if text.endswith("%"):
        value /= 100
    elif value > 1:
        raise argparse.ArgumentTypeError(f"rate out of range: {text!r} (a fraction from 0 to 1, "
                                         "or a percentage like 80%)")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"rate out of range: {text!r}")
    return value


def _alpha_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a significance level: {text!r} (use e.g. 0.05)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"significance level out of range: {text!r} (between 0 and 1, e.g. 0.05)")
    return value


def _percent_arg(text: str) -> float:
    """``20`` or ``20%`` → 0.2: an increase limit in percent (any non-negative number)."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (use e.g. 20 or 20%)") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"percentage out of range: {text!r} (0 or more, e.g. 20 for +20%%)")
    return value / 100


def _margin_arg(text: str) -> float:
    """``10`` or ``10%`` → 0.1: the non-inferiority margin in points (above 0, below 100)."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a margin: {text!r} (points, e.g. 10 or 10%)") from None
    if not (math.isfinite(value) and 0 < value < 100):
        raise argparse.ArgumentTypeError(f"margin out of range: {text!r} (more than 0 and less than 100 points)")
    return value / 100


def _criterion_floor_arg(text: str) -> tuple[str, float]:
    """``friendly=0.8`` or ``friendly=80%`` → ("friendly", 0.8); the name may itself contain ``=``."""
    name, sep, value = text.rpartition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=RATE, got {text!r} (e.g. friendly=0.8)")
    return name.strip(), _rate_arg(value.strip())


def add_compare_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", metavar="BASELINE", help="experiment id, unique id prefix, or path")
    parser.add_argument("current", metavar="CURRENT", help="experiment id, unique id prefix, or path")
    parser.add_argument("--results-dir", default=None, help="where experiments are stored (default: results)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument("--html", metavar="OUT", default=None, help="also write a self-contained HTML comparison")
    parser.add_argument("--scenario", metavar="ID", action="append", default=[],
                        help="show this scenario's two conversations side by side from the first turn where they "
                             "differ (repeatable; default: the scenarios that changed outcome, at most 5)")
    gate = parser.add_argument_group(
        "gate", "every metric below is tested in one family at --alpha (Holm-Tarone), the scenario run as the "
                "unit: exit 1 worse (a metric dropped), 0 not worse (each shown within --gate-margin), "
                "3 undecided (docs/gates.md)")
    gate.add_argument("--fail-on-regression", action="store_true",
                      help="fail if completion, the overall evaluation or any criterion dropped significantly on "
                           "the shared scenarios (one-sided Fisher's exact test on runs)")
    gate.add_argument("--gate-modified", action="store_true",
                      help="also test criteria whose definition changed between the experiments")
    gate.add_argument("--gate-margin", metavar="POINTS", type=_margin_arg, default=0.10,
                      help="'not worse' needs evidence that no gated metric dropped by more than POINTS "
                           "percentage points (default 10)")
    gate.add_argument("--sequential", action="store_true",
                      help="with --fail-on-regression: decide by anytime-valid e-values (valid however often more "
                           "runs are added and compared again); the exit code follows that decision, and the JSON "
                           "gate's 'sequential' names the scenarios worth another iteration (docs/gates.md)")
    gate.add_argument("--alpha", metavar="LEVEL", type=_alpha_arg, default=0.05,
                      help="family-wise significance level of the gate (default 0.05)")
    gate.add_argument("--min-completion", metavar="RATE", type=_rate_arg, default=None,
                      help="fail if completion on the shared scenarios is significantly below RATE (0.8 or 80%%)")
    gate.add_argument("--min-evaluation", metavar="RATE", type=_rate_arg, default=None,
                      help="fail if the evaluation rate on the shared scenarios is significantly below RATE")
    gate.add_argument("--min-criterion", metavar="NAME=RATE", type=_criterion_floor_arg, action="append", default=[],
                      help="fail if criterion NAME on the shared scenarios is significantly below RATE (repeatable)")
    gate.add_argument("--max-cost-increase", metavar="PCT", type=_percent_arg, default=None,
                      help="fail if the cost per shared scenario run rose significantly by more than PCT percent")
    gate.add_argument("--max-latency-increase", metavar="PCT", type=_percent_arg, default=None,
                      help="fail if the response latency per shared scenario run rose significantly by more than "
                           "PCT percent")


def _run_compare(args: argparse.Namespace, prog: str) -> int:
    from fabtest.compare import gate as gating
    from fabtest.compare.compute import compare
    from fabtest.compare.read import read_experiment, summarise
    from fabtest.compare.render import md_escape, render_json, render_markdown, render_text
    from fabtest.compare.sequential import decide

    results_dir = results_dir_of(args)
    options = gating.GateOptions(
        alpha=args.alpha, fail_on_regression=args.fail_on_regression, gate_modified=args.gate_modified,
        min_completion=args.min_completion, min_evaluation=args.min_evaluation, min_criteria=dict(args.min_criterion),
        max_cost_increase=args.max_cost_increase, max_latency_increase=args.max_latency_increase,
        margin=args.gate_margin)
    latency = None
    try:
        # Index rows added up as they are read (no transcripts) unless the HTML report or the latency
        # limit needs the transcripts.
        if args.html or args.max_latency_increase is not None:
            docs = [read_document(ref, results_dir)[1] for ref in (args.baseline, args.current)]
            if args.max_latency_increase is not None:
                latency = gating.paired(*(gating.latency_per_run(doc) for doc in docs))
            b_exp, c_exp = (summarise(doc) for doc in docs)
            del docs
        else:
            b_exp, c_exp = (read_experiment(ref, results_dir)[1] for ref in (args.baseline, args.current))
        comparison = compare(b_exp, c_exp)
    except ExperimentFileError as exc:
        return fail(str(exc), prog)
    except (KeyError, TypeError, AttributeError) as exc:
        return fail(f"malformed experiment file {args.baseline} or {args.current} ({type(exc).__name__}: {exc})", prog)
    try:  # before anything is printed: a bad --min-criterion name prints one line
        gate = gating.evaluate(comparison, options, cost=gating.paired(b_exp.cost_per_run(), c_exp.cost_per_run()),
                               latency=latency) if options.requested() else None
    except ValueError as exc:
        return fail(str(exc), prog)
    if args.sequential and not args.fail_on_regression:
        return fail("--sequential decides the --fail-on-regression gate: add --fail-on-regression", prog)
    sequential = decide(b_exp, c_exp, alpha=options.alpha, margin=options.margin,
                        problems=gate.problems if gate is not None else ()) if args.sequential else None
    if gate is None:  # the scenario labels still say only what the family found
        gating.relabel(comparison, options.alpha)
    comparison.tallies = None  # the per-scenario totals are done with
    warnings = gate.warnings if gate is not None else gating.modified_warnings(comparison, False)
    comparison.gate = gating.gate_dict(gate, warnings)
    if sequential is not None:  # its decision is the exit code: its line opens every output
        comparison.gate["sequential"] = sequential.to_dict()
        comparison.verdict = sequential.verdict()

    try:  # the first differing turn of each diffed pair is shown under its scenario, and side by side at the end
        diffs = _conversation_diffs(args, results_dir, comparison, b_exp, c_exp)
    except KeyError as exc:
        return fail(str(exc.args[0]), prog)

    def text(c: Any) -> str:
        return (f"Verdict: {c.verdict}\n\n" if c.verdict else "") + render_text(c, diffs)

    def markdown(c: Any) -> str:
        head = f"**Verdict: {md_escape(c.verdict)}**\n\n" if c.verdict else ""
        return head + render_markdown(c, gating.gate_markdown(gate, warnings, md_escape))

    renderer = {"text": text, "json": render_json, "markdown": markdown}[args.format]
    base, cur = b_exp.doc, c_exp.doc
    del b_exp, c_exp  # the per-scenario totals are done with: freed before the output is built
    sys.stdout.write(shown(_with_diffs(comparison, renderer, diffs, args.format,
                                       _files_dirs(args, results_dir) if diffs else ("", ""))))
    if args.html:
        from fabtest.report.html import render_comparison_html

        try:
            write_text_atomic(args.html, redact(render_comparison_html(base, cur, comparison, diffs)))
        except OSError as exc:
            return fail(f"cannot write {args.html}: {exc.strerror or exc}", prog)
        print(f"HTML comparison written to: {args.html}", file=sys.stderr)
    for line in gating.gate_lines(gate) if gate is not None else warnings:
        print(inert(f"{prog}: {line}"), file=sys.stderr)
    if sequential is not None:
        print(inert(f"{prog}: {sequential.line()}"), file=sys.stderr)
        return {"worse": gating.EXIT_FAILED, "not worse": gating.EXIT_PASSED,
                "undecided": gating.EXIT_UNDECIDED}[sequential.outcome]
    return gate.exit_code if gate is not None else EXIT_OK


def _conversation_diffs(args: argparse.Namespace, results_dir: str, comparison: Any, base: Experiment,
                        cur: Experiment) -> list[Any]:
    """Turn-by-turn diffs for ``--scenario`` or the scenarios that changed outcome (transcripts are
    read only when there is something to diff)."""
    from fabtest.experiment.diff import diff_scenarios

    ids = list(args.scenario) or [s.id for s in [*comparison.newly_failing, *comparison.newly_passing]][:5]
    if not ids:
        return []
    # the lean read has no transcripts: read just the entries that may be diffed
    return diff_scenarios(_entries_of(args.baseline, results_dir, base, ids),
                          _entries_of(args.current, results_dir, cur, ids), ids)


def _entries_of(ref: str, results_dir: str, exp: Experiment, wanted: list[str]) -> dict[str, Any]:
    """A document holding the whole entries of the scenarios ``wanted`` names (id, id prefix or
    name, as ``diff_scenarios`` matches them), read without parsing the other entries."""
    from fabtest.experiment.reader import read_entries, resolve_experiment

    if not exp.doc.get("lean"):  # parsed whole already (the HTML report, or another layout)
        return exp.doc
    # ids (the changed scenarios), else names or prefixes
    ids = set(wanted) if all(w in exp.scenarios for w in wanted) else {
        sid for sid, agg in exp.scenarios.items()
        if any(sid == w or agg.name == w or sid.startswith(w) for w in wanted)}
    entries = read_entries(resolve_experiment(ref, results_dir), ids)
    return {"scenario_results": entries} if entries is not None else read_document(ref, results_dir)[1]


def _files_dirs(args: argparse.Namespace, results_dir: str) -> tuple[str, str]:
    """Where each side's files are kept (``files/`` beside its experiment file), relative to the
    working directory, where a report printed here is written: a Markdown diff links each file there."""
    import os

    from fabtest.experiment.file_store import FILES_DIR
    from fabtest.experiment.reader import resolve_experiment

    def where(ref: str) -> str:
        folder = resolve_experiment(ref, results_dir).parent / FILES_DIR
        try:
            return Path(os.path.relpath(folder)).as_posix()
        except ValueError:  # another drive (Windows): no relative path
            return folder.resolve().as_posix()

    return where(args.baseline), where(args.current)


def _with_diffs(comparison: Any, renderer: Callable[[Any], str], diffs: list[Any], fmt: str,
                files_dirs: tuple[str, str]) -> str:
    if not diffs:
        return renderer(comparison)
    from fabtest.compare.render import render_diffs_markdown, render_diffs_text

    if fmt == "json":
        import dataclasses
        import json

        data = comparison.to_dict()  # render_json's document, with the diffs added (built once)
        data["conversation_diffs"] = [{**dataclasses.asdict(d), "what": d.what} for d in diffs]
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return renderer(comparison) + (render_diffs_markdown(diffs, files_dirs) if fmt == "markdown"
                                   else render_diffs_text(diffs, files_dirs=files_dirs))


def compare_main(argv: Sequence[str] | None = None) -> int:
    """``fabtest-compare BASELINE CURRENT [options]``."""
    parser = argparse.ArgumentParser(prog="fabtest-compare", description="Compare two fabtest experiments.")
    add_compare_args(parser)
    args = parser.parse_args(argv)
    register_llm_keys()  # what it prints and writes never shows the LLM keys this process holds
    return _run_compare(args, "fabtest-compare")


def register(sub: SubParsers) -> None:
    """``fabtest compare``: the same as ``fabtest-compare``."""
    p = sub.add_parser("compare", help="compare two experiments (same as fabtest-compare)")
    add_compare_args(p)
    p.set_defaults(func=lambda a: _run_compare(a, "fabtest compare"))
