"""``fabtest rejudge EXP --perturb``: the criterion robustness audit (judging/perturb.py).

It writes no new experiment (perturbed verdicts are not a run of anything): the audit goes to
``results/robustness/<EXP>.json`` (experiment/robustness.py), where ``fabtest show``, ``report``
and ``view`` find it. Exit 0 whatever it finds; 2 on bad input or a judge that fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fabtest.cli.common import EXIT_OK, experiment_to_rejudge, fail
from fabtest.cli.llms import judge_llm
from fabtest.errors import UsageError
from fabtest.llm.base import LLMError, LLMNotConfigured

__all__ = ["run_perturb"]


def run_perturb(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.config.settings import Settings
    from fabtest.experiment.robustness import write_robustness
    from fabtest.judging.perturb import (
        DEFAULT_MAX_MOVE,
        agent_models,
        audit_table,
        perturb_experiment,
        self_preference,
    )
    from fabtest.report.robustness import robustness_lines

    times = args.times or 1
    max_move = DEFAULT_MAX_MOVE if args.max_move is None else args.max_move
    try:
        info, results = experiment_to_rejudge(args, results_dir)
    except UsageError as exc:
        return fail(str(exc))
    try:
        llm = judge_llm(args.judge_model)
        other = judge_llm(args.perturb_model) if args.perturb_model else None
        rows = perturb_experiment(results, llm, other=other, times=times, criterion=args.criterion,
                                  scenario=args.scenario, files_dir=Path(results_dir),
                                  max_file_bytes=Settings.load(Path.cwd()).judge_max_file_bytes,
                                  progress=lambda line: print(f"perturbing {line}", file=sys.stderr))
    except (UsageError, LLMNotConfigured) as exc:
        return fail(str(exc))
    except LLMError as exc:
        return fail(f"the judge failed: {exc}")
    judges = [llm.model, *([other.model] if other is not None else [])]
    audit = {
        "experiment": info.id, "times": times,
        "judge": {"provider": llm.provider, "model": llm.model},
        "other_model": other.model if other is not None else None,
        "criterion": args.criterion, "scenario": args.scenario,
        **audit_table(rows, max_move),
        "agent_models": agent_models(results),
        "warnings": self_preference(judges, agent_models(results)),
        "checks": [r.to_dict() for r in rows],
    }
    path = None
    if rows and not args.no_save:
        path = write_robustness(audit, results_dir, info.id)
    if args.format == "json":
        sys.stdout.write(json.dumps({**audit, "written_to": str(path) if path else None}, indent=2,
                                    ensure_ascii=False) + "\n")
        return EXIT_OK
    lines = [f"Criterion robustness audit of {info.id} (judge {llm.model or llm.provider})", "",
             *robustness_lines(audit)]
    if path is not None:
        lines += ["", f"Written to {path} (fabtest show {info.id} and fabtest view show it)"]
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK
