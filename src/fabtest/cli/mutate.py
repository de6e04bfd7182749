"""``fabtest mutate ID``: the suite's own mutation score (docs/how-to/mutation-score.md).

The mutants and the checks are :mod:`fabtest.replay.mutation`'s; here are the options, the judge
(``[tool.fabtest.judge]`` of ./pyproject.toml, as ``rejudge`` builds it), the cost line and the
question before anything is spent, the file ``<results>/<id>.mutants.json`` and the exit codes:
0 done (whatever the score), 1 the question was answered no, 2 bad input, a judge that is needed
but not configured or that failed, or no terminal to ask on without ``--yes``; 130 when interrupted
while the mutants are judged (Ctrl-C or SIGTERM: one line, nothing written, an older file kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal import redaction
from fabtest.cli.common import fail, load_experiment, results_dir_of
from fabtest.errors import FabtestError, UsageError
from fabtest.llm.base import LLM, LLMNotConfigured

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["EXIT_DECLINED", "add_mutate_args", "register", "run_mutate"]

EXIT_OK, EXIT_DECLINED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _count_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 7)") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"out of range: {text} (from 1 to 100)")
    return value


def _control_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 2)") from None
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"out of range: {text} (from 0 to 10)")
    return value


def _seed_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r} (e.g. 0)") from None


def add_mutate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="ID", help="experiment id, unique prefix, or path")
    p.add_argument("--mutants", type=_count_arg, default=None, metavar="N",
                   help="mutants per recorded run (default: one per operator that applies, up to 9)")
    p.add_argument("--seed", type=_seed_arg, default=0, metavar="S",
                   help="seed of the choice of turns, calls and numbers to mutate (default 0)")
    p.add_argument("--scenario", default=None, help="mutate only this scenario (id, id prefix or name)")
    p.add_argument("--control", type=_control_arg, default=2, metavar="N",
                   help="judge each mutated run's judged checks N times unmutated (default 2); a check that fails its "
                        "own unchanged run is noisy and its failures on mutants are not counted as catches "
                        "(0: no control, every failure counts)")
    p.add_argument("--yes", action="store_true", help="go on without asking after the cost line")
    p.add_argument("--json", action="store_true", help="print the result as JSON (the cost line goes to stderr)")
    p.add_argument("--results-dir", "--results", dest="results_dir", default=None, metavar="DIR",
                   help="where the experiment is and <ID>.mutants.json goes (default: [tool.fabtest] results_dir)")


def _judge() -> tuple[Any, LLM | None, str]:
    """The judge as a run builds it (its samples, temperature and purpose); no LLM and the reason
    when none is configured."""
    from fabtest.cli.llms import configured_llm
    from fabtest.config.settings import Settings
    from fabtest.engine.judge import Judge
    from fabtest.llm.cache import salted

    settings = Settings.load(Path.cwd())
    try:
        llm: LLM | None = salted(configured_llm(settings, Path.cwd(), "judge"), "mutate")
        reason = ""
    except LLMNotConfigured as exc:
        llm, reason = None, str(exc)
    sampling = settings.judge
    judge = Judge(llm, samples=sampling.samples, per_criterion=sampling.samples_per_criterion,
                  temperature=sampling.temperature, purpose=settings.agent_description)
    return judge, llm, reason


def _confirm(args: argparse.Namespace) -> int | None:
    """None to go on; else the exit code (no terminal to ask on, or the answer was no)."""
    if args.yes:
        return None
    if not sys.stdin.isatty():
        print("fabtest: error: mutate spends judge calls: run again with --yes to go on "
              "(stdin is not a terminal to ask on)", file=sys.stderr)
        return EXIT_ERROR
    try:
        answer = input("Go on? [y/N] ")
    except (KeyboardInterrupt, EOFError):  # Ctrl-C or Ctrl-D at the question is a no
        answer = ""
        print(file=sys.stderr)
    if answer.strip().lower() not in ("y", "yes"):
        print("fabtest mutate: nothing run", file=sys.stderr)
        return EXIT_DECLINED
    return None


def run_mutate(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest._internal.files import write_text_atomic
    from fabtest.config.settings import Settings
    from fabtest.experiment.cost import price_table
    from fabtest.experiment.reader import MUTANTS_SUFFIX
    from fabtest.replay.mutation import (
        FileView,
        discount_noise,
        judge_calls,
        mutation_table,
        plan_controls,
        plan_mutants,
        run_controls,
        run_mutants,
    )
    from fabtest.replay.mutation_report import estimate, render_mutation_text

    redaction.register_project_secrets()  # ${VAR} of the agent tables, as a run of the project masks them
    try:
        info, results, _doc = load_experiment(args.experiment, results_dir, args.scenario)
        planned = plan_mutants(results, seed=args.seed, per_run=args.mutants, scenario=args.scenario)
        judge, llm, reason = _judge()
    except UsageError as exc:
        return fail(str(exc))
    controls = plan_controls(planned) if args.control else []
    calls = judge_calls(planned, judge) + args.control * judge_calls(controls, judge)
    runs = len({(p.result.id, p.result.iteration) for p in planned})
    settings = Settings.load(Path.cwd())
    cost = estimate(results, calls, llm.model if llm else None, price_table(settings.prices))
    # the judge sees the conversation's files again (their bytes kept under results/files), as rejudge shows them
    files = FileView(Path(results_dir), settings.judge_max_file_bytes)
    head = f"fabtest mutate: {len(planned)} mutants of {runs} recorded run{'' if runs == 1 else 's'} of {info.id}; "
    print(head + cost.line, file=sys.stderr if args.json else sys.stdout, flush=True)
    if calls and llm is None:
        return fail(f"the mutants need {calls} judge calls, but the judge LLM is not configured: {reason}")
    if calls:
        stop = _confirm(args)
        if stop is not None:
            return stop
    from fabtest._internal.signals import restore_sigterm, sigterm_as_interrupt

    show, judged = _progress(len(planned)), [0]

    def progress(line: str) -> None:
        judged[0] += 1
        show(line)

    sigterm = sigterm_as_interrupt()  # SIGTERM stops the judging as Ctrl-C does
    try:
        outcomes = run_mutants(planned, judge if llm else None, judge_reason=reason, progress=progress, files=files)
        checked = run_controls(controls, judge if llm else None, args.control, judge_reason=reason, files=files)
    except FabtestError as exc:  # LLMError included: the judge failed for good
        return fail(f"the judge failed: {exc}")
    except KeyboardInterrupt:  # a score over some of the mutants would mislead: write none, keep an older file
        print(f"fabtest mutate: interrupted after {judged[0]} of {len(planned)} mutants; nothing written",
              file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        restore_sigterm(sigterm)
    discount_noise(outcomes, checked)
    table = mutation_table(outcomes, results, checked)
    usages = [o.judge for o in outcomes] + [c.judge for c in checked]
    spent = sum(u.calls for u in usages)
    doc = {"experiment": info.id, "seed": args.seed, "mutants_per_run": args.mutants, "scenario": args.scenario,
           "control_samples": args.control,
           "judge": {"provider": llm.provider if llm else None, "model": llm.model if llm else None,
                     "calls": spent, "input_tokens": sum(u.input_tokens for u in usages),
                     "output_tokens": sum(u.output_tokens for u in usages)},
           "estimate": cost.to_dict(), **table, "mutants": [o.to_dict() for o in outcomes]}
    path = Path(results_dir) / f"{info.id}{MUTANTS_SUFFIX}"
    # a mutant quotes the recorded conversation (an older file, another tool's, may hold a key) and
    # the judge's reasoning: both go through the one redaction path, in the file and on the console
    doc = redaction.redact_obj(doc)
    write_text_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if args.json:
        sys.stdout.write(json.dumps({**doc, "written_to": str(path)}, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(redaction.redact(render_mutation_text(table, source=info.id, path=str(path))))
    return EXIT_OK


def _progress(total: int) -> Callable[[str], None]:
    """Progress on stderr, the first mutant and then one line per tenth of them: a line per mutant
    buried the table under hundreds of lines."""
    step, seen = max(1, total // 10), 0

    def show(line: str) -> None:
        nonlocal seen
        seen += 1
        if seen == 1 or seen % step == 0 or seen == total:
            print(f"  mutant {seen}/{total}: {redaction.redact(line)}", file=sys.stderr, flush=True)

    return show


def register(sub: SubParsers) -> None:
    """``fabtest mutate``."""
    p = sub.add_parser("mutate", help="the suite's mutation score: mutate the agent's recorded behaviour, re-run the "
                                      "checks and the judge on each mutant (no agent call), list vacuous checks")
    add_mutate_args(p)
    p.set_defaults(func=lambda a: run_mutate(a, results_dir_of(a)))
