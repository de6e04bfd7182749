"""``fabtest replay``: argument handling, the LLMs, the new experiment and the console summary.

The agent, judge and simulator are the ones ./pyproject.toml configures now (as a test run builds
them); the computing lives in :mod:`.replay`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest.cli.common import fail, load_experiment, results_dir_of
from fabtest.errors import UsageError
from fabtest.llm.base import LLMNotConfigured

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["add_replay_args", "register", "render_replay_text", "replay_env", "run_replay"]

EXIT_OK = 0
EXIT_FAILED = 1  # a run could not be replayed (the agent raised, timed out ...): the answer is incomplete


def _similarity_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.9)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"out of range: {text} (above 0, at most 1; 1 means equal text)")
    return value


def add_replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", metavar="EXP", help="experiment id, unique prefix, or path")
    p.add_argument("--scenario", default=None, help="replay only this scenario (id, id prefix or name)")
    p.add_argument("--no-continue", action="store_true",
                   help="stop at the first turn that differs and show the diff, instead of letting the simulator "
                        "(or the recorded script) go on")
    p.add_argument("--similarity", type=_similarity_arg, default=1.0, metavar="R",
                   help="responses whose words match at least this much count as the same (default 1: equal text, "
                        "whitespace aside); tool calls must always match by name and arguments")
    p.add_argument("--agent", default=None, metavar="NAME|MODULE:ATTR",
                   help="replay against this agent instead of the one each scenario configures")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-save", action="store_true", help="do not write the replayed experiment")
    p.add_argument("--results-dir", default=None)


def replay_env(args: argparse.Namespace) -> Any:
    """The settings, LLMs and options every replayed scenario shares; UsageError on bad input."""
    from fabtest._internal.targets import import_object
    from fabtest.cli.llms import configured_llm
    from fabtest.config.settings import Settings
    from fabtest.replay.conversations import MatchRule, ReplayEnv

    root = Path.cwd()
    settings = Settings.load(root)
    # `--agent pkg.bot:Bot` names a module of the project: importable from the project root, as under
    # pytest and `fabtest run`, also when the `fabtest` script (not `python -m`) runs without PYTHONPATH=.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if args.agent and args.agent not in settings.agents:
        if ":" not in args.agent:
            known = ", ".join(sorted(settings.agents)) or "none"
            raise UsageError(f"--agent {args.agent!r}: not a name of [tool.fabtest.agents] ({known}) "
                             "nor module:attribute")
        import_object(args.agent, where="--agent")
    env = ReplayEnv(settings, root, agent=args.agent, rule=MatchRule(args.similarity), keep_going=not args.no_continue)
    try:
        env.judge_llm = configured_llm(settings, root, "judge")
    except LLMNotConfigured as exc:
        env.judge_reason = str(exc)
    try:
        env.simulator_llm = configured_llm(settings, root, "simulator")
    except LLMNotConfigured as exc:
        env.simulator_reason = str(exc)
    return env


def run_replay(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.experiment.export import new_experiment_id
    from fabtest.experiment.gitinfo import git_info
    from fabtest.experiment.spool import write_experiment
    from fabtest.replay.conversations import replay_experiment, replayed_info

    try:
        info, results, doc = load_experiment(args.experiment, results_dir, args.scenario)
    except UsageError as exc:
        return fail(str(exc))
    try:
        env = replay_env(args)
    except UsageError as exc:
        return fail(str(exc))
    new_results, outcomes = replay_experiment(
        results, env, scenario=args.scenario, progress=lambda line: print(f"replaying {line}", file=sys.stderr))
    section = {"of": info.id, "similarity": args.similarity, "continue": not args.no_continue, "agent": args.agent,
               "scenarios": [o.to_dict() for o in outcomes]}
    new_id = None
    if new_results and not args.no_save:
        git = git_info(Path.cwd())
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new_info = replayed_info(info, new_experiment_id(), stamp, env, (git.commit, git.branch, git.dirty))
        write_experiment(new_info, new_results, results_dir, {"replay": section})
        new_id = new_info.id
    diffs = _diffs(doc, new_results, outcomes) if args.no_continue else []
    if args.format == "json":
        import dataclasses

        out = {**section, "replayed_experiment": new_id,
               "conversation_diffs": [{**dataclasses.asdict(d), "what": d.what} for d in diffs]}
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_replay_text(outcomes, source=info.id, new_id=new_id, similarity=args.similarity,
                                            diffs=diffs))
    return EXIT_FAILED if any(o.error for o in outcomes) else EXIT_OK


def _diffs(doc: dict[str, Any], new_results: list[Any], outcomes: list[Any]) -> list[Any]:
    """The turn diff (experiment/diff.py) of every run that branched, recorded against replayed."""
    from fabtest.experiment.diff import diff_scenarios

    out = []
    for new, outcome in zip(new_results, [o for o in outcomes if o.replayed], strict=True):
        if outcome.branched_at is None:
            continue
        old = [e for e in doc.get("scenario_results") or []
               if isinstance(e, dict) and e.get("id") == new.id and e.get("iteration", 1) == new.iteration]
        out += diff_scenarios({"scenario_results": old}, {"scenario_results": [new.model_dump(mode="json")]}, [new.id])
    return out


def _unchecked_text(o: Any) -> str:
    """What a replayed run's outcome does not cover: its checks left unchecked, by mode."""
    parts = [f"{n} {mode} check{'' if n == 1 else 's'}" for mode, n in sorted(o.not_rechecked.items())]
    head = " (NOT VERIFIED: " if not o.verified else " ("
    why = f": {o.unchecked_reason}" if o.unchecked_reason else ""
    return f"{head}{' and '.join(parts)} not re-checked{why})"


def _verdict(passed: bool | None) -> str:
    return "skipped" if passed is None else "passed" if passed else "failed"


def render_replay_text(outcomes: list[Any], *, source: str, new_id: str | None, similarity: float,
                       diffs: list[Any]) -> str:
    """One line per replayed run (where it branched, or "same as recorded"), the counts, and the
    turn diffs of ``--no-continue``."""
    if not outcomes:
        return f"Nothing to replay in {source} (no recorded run with turns matched).\n"
    shown = "equal text" if similarity >= 1 else f"similarity >= {similarity:g}"
    lines = [f"Replayed {len(outcomes)} run(s) of {source} against the current agent ({shown}, same tool calls):"]
    for o in outcomes:
        change = f"; {_verdict(o.passed_before)} -> {_verdict(o.passed_now)}" if o.replayed else ""
        if o.replayed and o.not_rechecked:
            change += _unchecked_text(o)
        lines.append(f"  - {o.name} (iteration {o.iteration}): {o.summary}{change}")
    replayed = [o for o in outcomes if o.replayed]
    failed = sum(bool(o.error) for o in replayed)
    same = sum(o.branched_at is None and not o.error and o.turns_replayed == o.turns_recorded for o in replayed)
    branched = sum(o.branched_at is not None and not o.error for o in replayed)
    skipped = len(outcomes) - len(replayed)
    unverified = sum(not o.verified for o in replayed)
    lines.append(f"Same as recorded: {same}; branched: {branched}"
                 + (f"; did not finish: {unfinished}" if (unfinished := len(replayed) - same - branched - failed)
                    else "")
                 + (f"; replay failed: {failed} (exit status {EXIT_FAILED})" if failed else "")
                 + (f"; not replayed: {skipped}" if skipped else "")
                 + (f"; outcome not verified (a must check not re-checked): {unverified}" if unverified else ""))
    if diffs:
        from fabtest.compare.render import render_diffs_text

        lines.append(render_diffs_text(diffs).rstrip("\n"))
    if new_id:
        lines.append(f"Replayed experiment: {new_id} (compare: fabtest-compare {source} {new_id})")
    return "\n".join(lines) + "\n"


def register(sub: SubParsers) -> None:
    """``fabtest replay``."""
    p = sub.add_parser("replay", help="re-run recorded conversations against the current agent, branching at the "
                                      "first turn that differs")
    add_replay_args(p)
    p.set_defaults(func=lambda a: run_replay(a, results_dir_of(a)))
