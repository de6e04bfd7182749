"""``fabtest shrink EXPERIMENT SCENARIO``: a failed run cut down to a short feature that fails every time.

The search is :mod:`fabtest.authoring.shrink`; this module picks the failed run and its check,
builds the agent and judge as ./pyproject.toml configures them (as ``fabtest replay`` does), says
what it spent, and writes the feature only when the failure reproduced: exit 0 with a feature,
1 when it did not reproduce scripted (or the budget ran out first), 2 for usage errors (and for a
file that appeared at the output path while it ran: never replaced, the feature is printed instead),
130 when interrupted (Ctrl-C or SIGTERM: one line, nothing written).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal import redaction
from fabtest.cli.common import load_experiment, results_dir_of
from fabtest.errors import UsageError

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["add_shrink_args", "register", "run_shrink"]

EXIT_OK, EXIT_NOT_REPRODUCED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _confirm_arg(text: str) -> tuple[int, int]:
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not k/n: {text!r} (e.g. 3/3 or 2/3)") from None
    if not 1 <= k <= n <= 20:
        raise argparse.ArgumentTypeError(f"out of range: {text} (1 <= k <= n <= 20)")
    return k, n


def _budget_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"out of range: {text} (1 to 10,000 replays)")
    return value


def add_shrink_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="EXPERIMENT", help="experiment id, unique prefix, or path")
    p.add_argument("scenario", metavar="SCENARIO", help="the scenario: its name, id or id prefix")
    p.add_argument("--run", type=int, default=None, metavar="N", help="the failed run (iteration) to shrink "
                                                                     "(default: the first failed run)")
    p.add_argument("--check", default=None, metavar="NAME",
                   help="the failed check to keep failing (its criterion or label; default: the first failed must)")
    p.add_argument("--confirm", type=_confirm_arg, default=(3, 3), metavar="K/N",
                   help="a candidate reproduces when the check fails in K of N replays (default 3/3)")
    p.add_argument("--budget", type=_budget_arg, default=60, metavar="REPLAYS",
                   help="stop after this many replays of the agent (default 60)")
    p.add_argument("--agent", default=None, metavar="NAME|MODULE:ATTR", help="shrink against this agent instead")
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="the feature to write (default: features/regressions/<scenario>.feature); never overwritten")
    p.add_argument("--results-dir", default=None)


def run_shrink(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest._internal.signals import restore_sigterm, sigterm_as_interrupt

    sigterm = sigterm_as_interrupt()  # SIGTERM stops the search as Ctrl-C does
    try:
        return _shrink(args, results_dir)
    except UsageError as exc:
        print(f"fabtest shrink: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # the feature is written whole at the very end, so there is nothing to undo
        print("fabtest shrink: interrupted; nothing written", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        restore_sigterm(sigterm)


def _shrink(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.authoring.feature_text import (
        check_steps,
        regression_feature,
        regression_path,
        stub_steps,
        write_feature,
    )
    from fabtest.authoring.shrink import Confirm, failing_checks, shrink
    from fabtest.cli.replay import replay_env

    if not args.scenario.strip():  # '' is a prefix of every id: it would shrink whichever run failed first
        raise UsageError("SCENARIO is empty: name the scenario to shrink (its name, id or id prefix)")
    info, results, _ = load_experiment(args.experiment, results_dir, args.scenario)
    runs = [r for r in results if (r.id.startswith(args.scenario) or r.name == args.scenario)
            and not r.passed and not r.skipped and (args.run is None or r.iteration == args.run)]
    if not runs:
        which = f"run {args.run} of " if args.run is not None else ""
        raise UsageError(f"{which}{args.scenario!r} in {info.id} did not fail: nothing to shrink")
    result = runs[0]
    checks = [c for c in failing_checks(result) if args.check is None or args.check in (c.criterion, c.type)]
    if not checks:
        named = ", ".join(sorted({c.criterion for c in failing_checks(result)})) or "none recorded"
        raise UsageError(f"no failed check {args.check!r} in run {result.iteration} (failed checks: {named})"
                         if args.check else f"run {result.iteration} failed ({result.failure_message}) but recorded "
                         "no failed check to shrink against")
    check = checks[0]
    steps = check_steps(check, result.criteria)
    if steps is None:
        raise UsageError(f'the failed check {check.type} "{check.criterion}" has no step form fabtest shrink can '
                         "write (shrink re-checks criteria, intents, grounding, response patterns, calls anywhere in "
                         "the conversation, tool trajectories and transcript text)")
    out = regression_path(result.name, args.output, fallback="shrunk")
    if out.exists():
        raise UsageError(f"{out} exists; fabtest shrink never overwrites a file (choose another with -o PATH)")
    env = replay_env(argparse.Namespace(agent=args.agent, similarity=1.0, no_continue=False))
    k, n = args.confirm
    print(f"shrinking run {result.iteration} of {result.name!r} ({len(result.transcript)} user turns) against "
          f'{check.type} "{check.criterion}": a candidate must fail {k} of {n} replays; budget {args.budget} replays',
          file=sys.stderr)
    outcome = shrink(result, check, env, confirm=Confirm(k, n), budget=args.budget,
                     progress=lambda line: print(f"  {line}", file=sys.stderr))
    spent = f"{outcome.replays} replay(s), {outcome.judge_calls} judge call(s)"
    if outcome.not_checkable:
        print(f"fabtest shrink: the check cannot be re-run on a replay ({redaction.redact(outcome.not_checkable)}); "
              f"{spent}; "
              "nothing written",
              file=sys.stderr)
        return EXIT_NOT_REPRODUCED
    if not outcome.reproduced:
        why = ("the budget ran out before the failure was confirmed" if outcome.budget_spent else
               f"it did not fail {k} of {n} times when its user turns were replayed scripted: the failure needs the "
               "simulated user's wording, or the agent or judge gives it only now and then "
               "(fabtest rejudge and --fabtest-iterations tell which)")
        print(f"fabtest shrink: the failure does not reproduce: {why}; {spent}; nothing written", file=sys.stderr)
        return EXIT_NOT_REPRODUCED
    setup, step = steps
    # the tools a stub answered in the run keep their answers in the written test, as in the replays
    setup = [*stub_steps((c.name, c.result, bool(c.metadata.get("error"))) for t in result.transcript
                         for c in t.tool_calls if c.stubbed), *setup]
    failed, tried = outcome.confirmed
    comments = [f"Shrunk by `fabtest shrink` from experiment {info.id}, run {result.iteration} of {result.name!r}"
                f" (failed: {_short(result.failure_message or check.details)}).",
                f"{len(result.transcript)} user turns -> {len(outcome.messages)}"
                + (f", {len(result.history)} seeded messages -> {len(outcome.history)}" if result.history else "")
                + f"; the check failed {failed} of {tried} "
                f"replays of the shrunk conversation; {spent}"
                + (" (budget spent: it may shrink further with a larger --budget)." if outcome.budget_spent else ".")]
    files_dir = f"{out.stem}_files"  # the kept turns' files, copied beside the feature from results/files
    text = regression_feature(result.name, outcome.messages, outcome.anchor, setup, step, comments=comments,
                              agent=args.agent if args.agent and ":" not in args.agent else None,
                              history=outcome.history, files_dir=files_dir)
    text = redaction.redact(text)  # a recorded line or failure message may quote a secret
    try:
        write_feature(out, text)
    except FileExistsError:  # made while the replays ran: keep it, and keep the work on screen
        sys.stdout.write(text)
        print(f"fabtest shrink: {out} appeared while shrinking; not overwritten: the shrunk feature is printed "
              "above (save it, or run again with -o PATH)", file=sys.stderr)
        return EXIT_USAGE
    copy_kept_files(outcome.messages, Path(results_dir), out.parent / files_dir)
    print(f"wrote {out}: {len(result.transcript)} user turns -> {len(outcome.messages)}, {spent}")
    return EXIT_OK


def copy_kept_files(messages: Any, results_dir: Path, folder: Path) -> None:
    """The files the shrunk messages send, from ``results/files/<sha256>`` to beside the feature."""
    from fabtest.authoring.feature_text import safe_file_name
    from fabtest.experiment.file_store import file_path

    for message in messages:
        for file in getattr(message, "files", []):
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file_path(results_dir, file.sha256), folder / safe_file_name(file.name, file.sha256))


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def register(sub: SubParsers) -> None:
    """``fabtest shrink``."""
    p = sub.add_parser("shrink", help="cut a failed run down to the fewest user turns that still fail its check, "
                                      "and write it as a regression feature")
    add_shrink_args(p)
    p.set_defaults(func=lambda a: run_shrink(a, results_dir_of(a)))
