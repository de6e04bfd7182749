"""Command line: ``fabtest`` (init, list, show, report, compare, run, steps) and ``fabtest-compare``.

Exit codes: 0 normally (a requested gate: not worse), 1 when a requested gate finds the current
experiment worse, 3 when it is undecided, 2 for usage errors and for missing, malformed or
ambiguous experiment files (a one-line message on stderr, never a traceback).
The gate is checked before anything is printed, so a bad ``--min-criterion`` name prints nothing
but its error.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal.files import write_text_atomic
from fabtest._internal.redaction import redact, register_llm_keys
from fabtest._internal.terminal import inert
from fabtest.experiment.export import ExperimentFileError, list_experiment_files, read_document

if TYPE_CHECKING:
    from fabtest.compare.read import Experiment

__all__ = ["compare_main", "main"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2


def _default_results_dir() -> str:
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


def _add_compare_args(parser: argparse.ArgumentParser) -> None:
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


def _fail(prog: str, message: str) -> int:
    print(inert(f"{prog}: error: {message}"), file=sys.stderr)  # a file name may hold escape codes
    return EXIT_ERROR


def _run_compare(args: argparse.Namespace, prog: str) -> int:
    from fabtest.compare import gate as gating
    from fabtest.compare.compute import compare
    from fabtest.compare.read import read_experiment, summarise
    from fabtest.compare.render import md_escape, render_json, render_markdown, render_text
    from fabtest.compare.sequential import decide

    results_dir = args.results_dir or _default_results_dir()
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
        return _fail(prog, str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        return _fail(prog, f"malformed experiment file {args.baseline} or {args.current} ({type(exc).__name__}: {exc})")
    try:  # before anything is printed: a bad --min-criterion name prints one line
        gate = gating.evaluate(comparison, options, cost=gating.paired(b_exp.cost_per_run(), c_exp.cost_per_run()),
                               latency=latency) if options.requested() else None
    except ValueError as exc:
        return _fail(prog, str(exc))
    if args.sequential and not args.fail_on_regression:
        return _fail(prog, "--sequential decides the --fail-on-regression gate: add --fail-on-regression")
    sequential = decide(b_exp, c_exp, alpha=options.alpha, margin=options.margin,
                        problems=gate.problems if gate is not None else ()) if args.sequential else None
    if gate is None:  # the scenario labels still say only what the family found
        gating.relabel(comparison, options.alpha)
    comparison.tallies = None  # the per-scenario totals are done with
    warnings = gate.warnings if gate is not None else gating.modified_warnings(comparison, False)
    comparison.gate = gating.gate_dict(gate, warnings)
    if sequential is not None:
        comparison.gate["sequential"] = sequential.to_dict()

    try:  # the first differing turn of each diffed pair is shown under its scenario, and side by side at the end
        diffs = _conversation_diffs(args, results_dir, comparison, b_exp, c_exp)
    except KeyError as exc:
        return _fail(prog, str(exc.args[0]))

    def text(c: Any) -> str:
        return (f"Verdict: {c.verdict}\n\n" if c.verdict else "") + render_text(c, diffs)

    def markdown(c: Any) -> str:
        head = f"**Verdict: {md_escape(c.verdict)}**\n\n" if c.verdict else ""
        gated = "".join(line + "\n" for line in gating.gate_markdown(gate, warnings, md_escape))
        return head + render_markdown(c) + gated

    renderer = {"text": text, "json": render_json, "markdown": markdown}[args.format]
    base, cur = b_exp.doc, c_exp.doc
    del b_exp, c_exp  # the per-scenario totals are done with: freed before the output is built
    sys.stdout.write(_shown(_with_diffs(comparison, renderer, diffs, args.format)))
    if args.html:
        from fabtest.report.html import render_comparison_html

        try:
            write_text_atomic(args.html, redact(render_comparison_html(base, cur, comparison, diffs)))
        except OSError as exc:
            return _fail(prog, f"cannot write {args.html}: {exc.strerror or exc}")
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
    from fabtest.experiment.export import read_entries, resolve_experiment

    if not exp.doc.get("lean"):  # parsed whole already (the HTML report, or another layout)
        return exp.doc
    # ids (the changed scenarios), else names or prefixes
    ids = set(wanted) if all(w in exp.scenarios for w in wanted) else {
        sid for sid, agg in exp.scenarios.items()
        if any(sid == w or agg.name == w or sid.startswith(w) for w in wanted)}
    entries = read_entries(resolve_experiment(ref, results_dir), ids)
    return {"scenario_results": entries} if entries is not None else read_document(ref, results_dir)[1]


def _with_diffs(comparison: Any, renderer: Callable[[Any], str], diffs: list[Any], fmt: str) -> str:
    if not diffs:
        return renderer(comparison)
    from fabtest.compare.render import render_diffs_markdown, render_diffs_text

    if fmt == "json":
        import dataclasses
        import json

        data = comparison.to_dict()  # render_json's document, with the diffs added (built once)
        data["conversation_diffs"] = [{**dataclasses.asdict(d), "what": d.what} for d in diffs]
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return renderer(comparison) + (render_diffs_markdown(diffs) if fmt == "markdown" else render_diffs_text(diffs))


def _shown(text: str) -> str:
    """Text from results files for the terminal: secrets redacted (a file written by an older fabtest
    or another tool may hold the LLM key this process holds), escape codes shown, not obeyed."""
    return inert(redact(text))


def compare_main(argv: Sequence[str] | None = None) -> int:
    """``fabtest-compare BASELINE CURRENT [options]``."""
    parser = argparse.ArgumentParser(prog="fabtest-compare", description="Compare two fabtest experiments.")
    _add_compare_args(parser)
    args = parser.parse_args(argv)
    register_llm_keys()  # what it prints and writes never shows the LLM keys this process holds
    return _run_compare(args, "fabtest-compare")


def _cmd_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from fabtest.experiment.fmt import pct

    results_dir = args.results_dir or _default_results_dir()
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
        print(_shown(f"No experiments in {results_dir}/"))
    else:
        print(_shown(tabulate(rows, headers=["ID", "Timestamp", "Name", "Scenarios", "Completion", "Evaluation",
                                             "Git"])))
    print(_shown(_skipped_files(skipped)), end="")
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


def _cmd_show(args: argparse.Namespace) -> int:
    from fabtest.experiment.robustness import attach_robustness
    from fabtest.report.console import previous_experiment_id, render_summary

    results_dir = args.results_dir or _default_results_dir()
    try:
        path, doc = read_document(args.experiment, results_dir)
        doc = attach_robustness(doc, path.parent)  # fabtest rejudge --perturb's audit, when there is one
        text = render_summary(doc, path, previous_experiment_id(path.parent, doc["experiment"]["id"]))
    except ExperimentFileError as exc:
        return _fail("fabtest", str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        return _fail("fabtest", f"malformed experiment file ({type(exc).__name__}: {exc})")
    sys.stdout.write(_shown(text))
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from fabtest.experiment.robustness import attach_robustness
    from fabtest.report.html import render_experiment_html

    results_dir = args.results_dir or _default_results_dir()
    try:
        path, doc = read_document(args.experiment, results_dir)
        html = render_experiment_html(attach_robustness(doc, path.parent))
    except ExperimentFileError as exc:
        return _fail("fabtest", str(exc))
    except (KeyError, TypeError, AttributeError) as exc:
        return _fail("fabtest", f"malformed experiment file ({type(exc).__name__}: {exc})")
    out = Path(args.output) if args.output else path.with_suffix(".html")
    try:
        write_text_atomic(out, redact(html))
    except OSError as exc:
        return _fail("fabtest", f"cannot write {out}: {exc.strerror or exc}")
    print(f"Report written to: {out}")
    return EXIT_OK


def _port(text: str) -> int:
    """A TCP port for ``fabtest view --port``: 0 (any free one) to 65535, else a usage error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a port number: {text!r} (use e.g. 8000, or 0 for any free port)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {text!r} (0 to 65535; 0 picks any free port)")
    return port


def _cmd_view(args: argparse.Namespace) -> int:
    from fabtest.view import build_site, serve

    results_dir = args.results_dir or _default_results_dir()
    if not Path(results_dir).is_dir():
        return _fail("fabtest view", f"{results_dir}: no such directory (give the results directory: "
                                     "fabtest view RESULTS_DIR, or run pytest first)")
    if args.build:
        try:
            count = build_site(results_dir, args.build)
        except OSError as exc:
            return _fail("fabtest view", f"cannot write {args.build}: {exc.strerror or exc}")
        print(f"fabtest view: {count} files written to {args.build} (open {Path(args.build) / 'index.html'})")
        return EXIT_OK
    try:
        serve(results_dir, args.port, open_browser=not args.no_open)
    except OSError as exc:
        return _fail("fabtest view", f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}")
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:
    from fabtest.experiment.recorder import recover_pending

    results_dir = args.results_dir or _default_results_dir()
    done = recover_pending(results_dir)
    if not done:
        print(f"No interrupted experiments in {results_dir}/")
    failed = 0
    for _journal, path, error in done:
        if path is not None:
            print(f"Recovered (interrupted): {path}")
        else:
            failed += 1
            print(inert(f"fabtest: error: {error}"), file=sys.stderr)
    return EXIT_ERROR if failed else EXIT_OK


def _cmd_merge(args: argparse.Namespace) -> int:
    from fabtest.errors import UsageError
    from fabtest.experiment.merge import MergeError, merge_parts
    from fabtest.experiment.recorder import check_experiment_id

    try:
        check_experiment_id(args.output, "-o")
        path = merge_parts(args.parts, args.results_dir or _default_results_dir(), args.output)
    except (MergeError, UsageError) as exc:
        return _fail("fabtest merge", str(exc))
    print(f"Merged {len(args.parts)} part(s) into {path}")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        from fabtest.cli.run import run_cli
    except ImportError as exc:
        return _fail("fabtest", f"the playbook runner is not available (fabtest.cli.run: {exc})")
    result = run_cli(list(args.args))
    return int(result or 0)


def _cmd_steps(args: argparse.Namespace) -> int:
    from fabtest.pytest_plugin.vocabulary import collect_steps, collection_errors, render_steps

    paths = list(args.paths) or (["features"] if Path("features").is_dir() else ["."])
    steps, code, output = collect_steps(paths)
    errors = collection_errors(output)
    if code not in (0, 5) and not (steps and errors):  # 5: nothing collected, which still lists the built-in steps
        tail = errors or [line for line in output.splitlines() if line.strip()][-15:]
        sys.stderr.write("\n".join(tail) + "\n")
        return _fail("fabtest steps", f"pytest could not collect {' '.join(paths)} (exit code {code}); see above")
    sys.stdout.write(render_steps(steps))
    if errors:  # a feature that does not collect hides none of the vocabulary, only its own example lines
        sys.stderr.write("fabtest steps: warning: some files did not collect (their lines give no examples):\n"
                         + "\n".join(f"  {line}" for line in errors) + "\n")
    return EXIT_OK


def _cmd_init(args: argparse.Namespace) -> int:
    from fabtest.cli.init import next_steps, plan_init, write_init
    from fabtest.errors import UsageError

    try:
        plan = plan_init(Path(args.dir), agent=args.agent)
        lines = write_init(plan)
    except UsageError as exc:
        return _fail("fabtest init", str(exc))
    print(f"fabtest init: wrote in {plan.root}:")
    print("\n".join(lines))
    print(next_steps(plan), end="")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``fabtest init | list | show | report | view | compare | recover | rejudge | calibrate | replay | mutate | import
    | shrink | faults | run | steps``."""
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw and raw[0] == "run":  # the playbook runner parses its own options (argparse REMAINDER can't)
        return _cmd_run(argparse.Namespace(args=raw[1:]))
    parser = argparse.ArgumentParser(prog="fabtest", description="fabtest experiments and playbooks.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("init", help="set up fabtest in this project: a [tool.fabtest] table, first features, an "
                                    "offline script (pytest features/ is green with no key); never overwrites")
    p.add_argument("--agent", metavar="MODULE:ATTR", default=None,
                   help="use this existing agent (must import from the project directory) instead of a stub")
    p.add_argument("--dir", default=".", help="the project directory (default: the current directory)")
    p.set_defaults(func=_cmd_init)

    p = sub.add_parser("list", help="list stored experiments")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("show", help="print the summary of a stored experiment")
    p.add_argument("experiment", metavar="ID", help="experiment id, unique prefix, or path")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("report", help="write the self-contained HTML report of an experiment")
    p.add_argument("experiment", metavar="ID", help="experiment id, unique prefix, or path")
    p.add_argument("-o", "--output", default=None, help="output file (default: results/<id>.html)")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("compare", help="compare two experiments (same as fabtest-compare)")
    _add_compare_args(p)
    p.set_defaults(func=lambda a: _run_compare(a, "fabtest compare"))

    p = sub.add_parser("view",
                       help="browse experiments, trends, comparisons and conversations (or --build a static site)")
    p.add_argument("results_dir", nargs="?", default=None, metavar="RESULTS_DIR",
                   help="the results directory (default: [tool.fabtest] results_dir)")
    p.add_argument("--build", default=None, metavar="DIR",
                   help="write the site as static files to DIR instead of serving it")
    p.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: any free port)")
    p.add_argument("--no-open", action="store_true", help="do not open the browser; just print the URL")
    p.set_defaults(func=_cmd_view)

    p = sub.add_parser("recover", help="turn journals of interrupted runs into experiment files")
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=_cmd_recover)

    p = sub.add_parser("merge", help="combine the experiment parts of one sharded run into one experiment")
    p.add_argument("parts", nargs="+", metavar="PART", help="experiment files (or ids) written by the shards")
    p.add_argument("-o", "--output", default=None, metavar="ID",
                   help="id of the merged experiment (default: the parts' id)")
    p.add_argument("--results-dir", default=None, help="where the merged <id>.json goes (and ids are looked up)")
    p.set_defaults(func=_cmd_merge)

    p = sub.add_parser("steps", help="list the step vocabulary (built-in and the project's own), one example each")
    p.add_argument("paths", nargs="*", metavar="PATH", help="what pytest collects to find the project's steps "
                                                            "(default: features/ if it exists, else .)")
    p.set_defaults(func=_cmd_steps)

    from fabtest.cli import judging, perturb

    p = sub.add_parser("rejudge", help="re-judge an experiment's recorded transcripts: is the judge consistent?")
    judging.add_rejudge_args(p)
    p.set_defaults(func=lambda a: (perturb.run_perturb if a.perturb else judging.run_rejudge)(
        a, a.results_dir or _default_results_dir()))

    p = sub.add_parser("calibrate", help="judge labelled examples: accuracy and Cohen's kappa against human verdicts")
    judging.add_calibrate_args(p)
    p.set_defaults(func=judging.run_calibrate)

    from fabtest.cli import replay as replay_command

    p = sub.add_parser("replay", help="re-run recorded conversations against the current agent, branching at the "
                                      "first turn that differs")
    replay_command.add_replay_args(p)
    p.set_defaults(func=lambda a: replay_command.run_replay(a, a.results_dir or _default_results_dir()))

    from fabtest.cli import mutate as mutate_command

    p = sub.add_parser("mutate", help="the suite's mutation score: mutate the agent's recorded behaviour, re-run the "
                                      "checks and the judge on each mutant (no agent call), list vacuous checks")
    mutate_command.add_mutate_args(p)
    p.set_defaults(func=lambda a: mutate_command.run_mutate(a, a.results_dir or _default_results_dir()))

    from fabtest.cli import faults as faults_command

    p = sub.add_parser("faults",
                       help="the fault matrix: re-run each passing scenario with each tool it called failing, "
                            "timing out, empty, malformed or injected; prints held / broke")
    faults_command.add_faults_args(p)
    p.set_defaults(func=lambda a: faults_command.run_faults(a, a.results_dir or _default_results_dir()))

    from fabtest.cli import generate as generate_command

    p = sub.add_parser("generate", help="draft scenario-set records aimed at what the last run never exercised")
    generate_command.add_generate_args(p)
    p.set_defaults(func=lambda a: generate_command.run_generate(a, a.results_dir or _default_results_dir()))

    from fabtest.cli import import_conversation

    p = sub.add_parser("import", help="turn a recorded conversation (a fabtest run, OpenAI or Gemini messages) "
                                      "into a scripted regression feature")
    import_conversation.add_import_args(p)
    p.set_defaults(func=lambda a: import_conversation.run_import(a, a.results_dir or _default_results_dir()))
    p.add_argument("--results-dir", default=None)

    from fabtest.cli import shrink

    p = sub.add_parser("shrink", help="cut a failed run down to the fewest user turns that still fail its check, "
                                      "and write it as a regression feature")
    shrink.add_shrink_args(p)
    p.set_defaults(func=lambda a: shrink.run_shrink(a, a.results_dir or _default_results_dir()))

    from fabtest.cli import score

    score.register(sub)

    p = sub.add_parser("run", help="run playbook files", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="FILE")
    p.set_defaults(func=_cmd_run)

    args = parser.parse_args(argv)
    register_llm_keys()  # what any command prints and writes never shows the LLM keys this process holds
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
