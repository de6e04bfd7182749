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

from fabtest.errors import UsageError
from fabtest.llm.base import LLM, LLMError, LLMNotConfigured

__all__ = ["add_rejudge_args", "judge_llm", "run_rejudge"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> int:
    print(f"fabtest: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def judge_llm(judge_model: str | None) -> LLM:
    """The judge LLM as ./pyproject.toml configures it (``judge_model`` overrides the model)."""
    from fabtest.llm.factory import role_llm
    from fabtest.settings import Settings

    root = Path.cwd()
    settings = Settings.load(root)
    configured = settings.judge
    if judge_model:
        configured = configured.model_copy(update={"model": judge_model})
    return role_llm(configured.llm_settings(settings.max_concurrency), offline_llm=settings.offline_llm,
                    cache_mode=settings.llm_cache, cache_dir=str(root / settings.cache_dir),
                    backoff_base_s=configured.backoff)


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
    p.add_argument("--times", type=_times_arg, default=3, help="how many times to ask the judge (default 3)")
    p.add_argument("--criterion", default=None, help="re-judge only this criterion")
    p.add_argument("--scenario", default=None, help="re-judge only this scenario (id, id prefix or name)")
    p.add_argument("--judge-model", default=None, help="another judge model (same provider) for the re-judging")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-save", action="store_true", help="do not write the re-judged experiment")
    p.add_argument("--results-dir", default=None)


def run_rejudge(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.experiment.export import (ExperimentFileError, build_document, load_document, new_experiment_id,
                                           write_document)
    from fabtest.judging.render import render_rejudge_text
    from fabtest.judging.rejudge import agreement_table, rejudge_experiment, rejudged_info

    try:
        info, results, _doc = load_document(args.experiment, results_dir)
    except ExperimentFileError as exc:
        return _fail(str(exc))
    if args.scenario and not any(r.id.startswith(args.scenario) or r.name == args.scenario for r in results):
        return _fail(f"--scenario {args.scenario!r}: no scenario of {info.id} has that id or name")
    if args.criterion and not any(c.criterion == args.criterion for r in results
                                  for c in [*r.evaluations, *r.expectations] if c.type == "satisfy"):
        return _fail(f"--criterion {args.criterion!r}: {info.id} has no 'satisfy' check of that criterion")
    try:
        llm = judge_llm(args.judge_model)
        new_results, rows = rejudge_experiment(results, llm, times=args.times, criterion=args.criterion,
                                               scenario=args.scenario,
                                               progress=lambda line: print(f"re-judging {line}", file=sys.stderr))
    except (UsageError, LLMNotConfigured) as exc:
        return _fail(str(exc))
    except LLMError as exc:
        return _fail(f"the judge failed: {exc}")
    table = agreement_table(rows)
    new_id = None
    if rows and not args.no_save:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new_info = rejudged_info(info, new_experiment_id(), stamp, (llm.provider, llm.model), args.times)
        doc = build_document(new_info, new_results)
        doc["rejudge"] = {"of": info.id, "times": args.times, "criterion": args.criterion, "scenario": args.scenario,
                          "agreement": table, "checks": [r.to_dict() for r in rows]}
        write_document(doc, results_dir)
        new_id = new_info.id
    if args.format == "json":
        sys.stdout.write(json.dumps({"of": info.id, "rejudged_experiment": new_id, "times": args.times,
                                     "agreement": table, "checks": [r.to_dict() for r in rows]}, indent=2) + "\n")
    else:
        sys.stdout.write(render_rejudge_text(table, source=info.id, new_id=new_id, times=args.times))
    return EXIT_OK
