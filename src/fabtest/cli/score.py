"""``fabtest score LOGS FEATURE...``: judge logged production conversations with ``@production`` features.

Argument handling, the judge, the experiment file and the summary; the reading, selecting and
judging live in :mod:`fabtest.production`. No agent is called. Exit codes: 0 every run passed,
1 a ``must`` failed in some conversation (or the judge failed a run), 2 bad input (one line),
130 interrupted (Ctrl-C): what was judged is written, marked interrupted, and counted as scored.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest.cli.common import results_dir_of
from fabtest.errors import UsageError

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register", "run_score"]

EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
#: seconds between two progress lines on stderr
PROGRESS_EVERY_S = 5.0
_DOLLARS = re.compile(r"^\s*(?:\$\s*(?P<a>\d+(?:\.\d+)?)|(?P<b>\d+(?:\.\d+)?)\s*usd)\s*$", re.IGNORECASE)


def _dollars(text: str) -> float:
    """``$5``, ``$2.50``, ``5usd`` or ``5 USD``, as ``--fabtest-budget`` spells dollars."""
    match = _DOLLARS.match(text)
    if not match or float(match.group("a") or match.group("b")) <= 0:
        raise argparse.ArgumentTypeError(f"expected dollars above $0 ($5, 2.50usd), got {text!r}")
    return float(match.group("a") or match.group("b"))


def _sample(text: str) -> Any:
    from fabtest.production.selection import Sample

    raw = text.strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1])
            if not 0 < value <= 100:
                raise ValueError
            return Sample(fraction=value / 100)
        count = int(raw)
        if count < 1:
            raise ValueError
        return Sample(count=count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share (10%) or a number of conversations (200), "
                                         f"got {text!r}") from None


def _since(text: str) -> Any:
    from fabtest.production.selection import parse_since

    try:
        return parse_since(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date or time (2026-01-31, 2026-01-31T12:00:00Z), "
                                         f"got {text!r}") from None


def register(sub: SubParsers) -> None:
    """``fabtest score``'s sub-parser."""
    p = sub.add_parser("score", help="judge logged production conversations with the Then steps of @production "
                                     "features (no agent call): an experiment of one run per conversation")
    p.add_argument("logs", metavar="LOGS", help="a log file or a folder of them (OTLP/JSON, Langfuse, Phoenix, "
                                                "MLflow, OpenAI chat JSONL, fabtest experiments; told from content)")
    p.add_argument("features", nargs="+", metavar="FEATURE", help="@production feature files whose Then steps judge "
                                                                  "every conversation")
    p.add_argument("--experiment-id", default=None, metavar="ID", help="the new experiment's id (default: a new one)")
    p.add_argument("--results-dir", default=None, metavar="DIR",
                   help="where the experiment and the scoring state go (default: [tool.fabtest] results_dir)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--all", action="store_true", help="score every conversation again, also those already scored "
                                                      "with these checks")
    p.add_argument("--sample", type=_sample, default=None, metavar="N|P%",
                   help="judge a reproducible sample: a share (10%%) or a number of conversations (200)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--since", type=_since, default=None, metavar="TIME",
                   help="only conversations that started at or after TIME (2026-01-31 or an ISO time, UTC)")
    p.add_argument("--budget", type=_dollars, default=None, metavar="$USD",
                   help="stop starting conversations once the judge has spent this much ($5); the rest are scored "
                        "next time")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_score(args, results_dir_of(args))


def _progress() -> Any:
    """A callback that prints a line on stderr at most every :data:`PROGRESS_EVERY_S` seconds."""
    state = {"last": time.monotonic(), "done": 0, "failed": 0}

    def tick(_conversation: Any, results: list[Any]) -> None:
        state["done"] += 1
        state["failed"] += any(not r.passed and not r.skipped for r in results)
        if time.monotonic() - state["last"] >= PROGRESS_EVERY_S:
            state["last"] = time.monotonic()
            print(f"fabtest score: {state['done']} conversation(s) judged, {state['failed']} failed a must",
                  file=sys.stderr, flush=True)
    return tick


def run_score(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.config.settings import Settings
    from fabtest.experiment.export import document_path, new_experiment_id
    from fabtest.experiment.recorder import check_experiment_id
    from fabtest.production.features import load_features
    from fabtest.production.logs import read_logs
    from fabtest.production.selection import Counts, mask_of, select
    from fabtest.production.state import ScoredState, checks_fingerprint

    root = Path.cwd()
    try:
        check_experiment_id(args.experiment_id, "--experiment-id")
        settings = Settings.load(root)
        scenarios = load_features(list(args.features), root)
        experiment_id = args.experiment_id or new_experiment_id()
        if document_path(results_dir, experiment_id).exists():
            raise UsageError(f"--experiment-id {experiment_id}: {document_path(results_dir, experiment_id)} exists; "
                             "choose another id")
        env = _env(settings, root, args.budget)
        counts = Counts()
        state = ScoredState(results_dir)
        checks = checks_fingerprint(scenarios)
        mask = mask_of(settings)
        logs = read_logs([args.logs], warn=lambda line: print(f"fabtest score: warning: {line}", file=sys.stderr),
                         formats=counts.formats)
        chosen = select(logs, mask=mask, state=None if args.all else state, checks=checks, since=args.since,
                        sample=args.sample, seed=args.seed, counts=counts)
        outcome = _score(chosen, scenarios, env, settings, results_dir, experiment_id, args)
    except UsageError as exc:
        print(f"fabtest score: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("fabtest score: interrupted before any conversation was judged; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    previous = state.latest_experiment
    if outcome["path"] is not None:
        state.record(outcome["scored"], checks, experiment_id)
    _report(args, outcome, counts, env, previous)
    if outcome["interrupted"]:
        print(f"fabtest score: interrupted; the {len(outcome['scored'])} conversation(s) judged are saved in "
              f"{outcome['id']} (marked interrupted) and will not be judged again", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_FAILED if outcome["failing"] else EXIT_OK


def _env(settings: Any, root: Path, budget: float | None) -> Any:
    from fabtest.cli.llms import configured_llm
    from fabtest.llm.base import LLMNotConfigured
    from fabtest.production.scoring import ScoreEnv

    env = ScoreEnv(settings, root, budget_usd=budget)
    try:
        env.judge = configured_llm(settings, root, "judge")
    except LLMNotConfigured as exc:
        env.judge_reason = str(exc)
    return env


def _score(chosen: Any, scenarios: list[Any], env: Any, settings: Any, results_dir: str, experiment_id: str,
           args: argparse.Namespace) -> dict[str, Any]:
    """Judge, write the experiment (nothing when nothing was new), and say what failed."""
    from fabtest.experiment.gitinfo import git_info
    from fabtest.experiment.model import ExperimentInfo
    from fabtest.experiment.recorder import utc_timestamp
    from fabtest.experiment.spool import write_experiment
    from fabtest.llm.factory import describe_llm
    from fabtest.production.scoring import score_all

    scored: list[tuple[str, str]] = []
    failing: list[dict[str, Any]] = []
    tick = _progress()

    def done(conversation: Any, results: list[Any]) -> None:
        scored.append((conversation.id, conversation.content_hash()))
        failing.extend({"conversation": conversation.id, "scenario": r.name, "message": r.failure_message}
                       for r in results if not r.passed and not r.skipped)
        tick(conversation, results)

    results = score_all(chosen, scenarios, env, workers=settings.max_concurrency, on_done=done)
    first = next(results, None)
    if first is None:
        return {"path": None, "id": None, "scored": scored, "failing": failing, "runs": 0, "interrupted": False}
    git = git_info(Path.cwd())
    provider, model, note = describe_llm(env.judge)
    info = ExperimentInfo(id=experiment_id, timestamp=utc_timestamp(), name=f"production: {args.logs}",
                          tags=["production"], git_commit=git.commit, git_branch=git.branch, git_dirty=git.dirty,
                          judge_provider=provider, judge_model=model, judge_note=note, source="production",
                          prices={k: v.model_dump() for k, v in settings.prices.items()})
    runs = [0]

    def every() -> Any:
        """The results as they finish; Ctrl-C ends them, and what was judged is still written."""
        yield first
        runs[0] += 1
        try:
            for result in results:
                runs[0] += 1
                yield result
        except KeyboardInterrupt:
            info.interrupted = True

    sample = args.sample and (f"{args.sample.fraction:.0%}" if args.sample.fraction is not None else args.sample.count)
    section: dict[str, Any] = {"logs": args.logs, "features": list(args.features), "all": args.all, "sample": sample,
                               "seed": args.seed if sample else None,
                               "since": args.since.isoformat() if args.since else None}
    path = write_experiment(info, every(), results_dir, {"production": section})
    return {"path": path, "id": experiment_id, "scored": scored, "failing": failing, "runs": runs[0],
            "interrupted": info.interrupted}


def _report(args: argparse.Namespace, outcome: dict[str, Any], counts: Any, env: Any, previous: str | None) -> None:
    left = []
    if counts.already_scored:
        left.append(f"{counts.already_scored} already scored (--all scores them again)")
    if counts.before_since:
        left.append(f"{counts.before_since} before --since")
    if counts.not_sampled:
        left.append(f"{counts.not_sampled} not in the sample")
    if env.spent:  # reading stopped with the judging: how many are left is not known
        left.append(f"the rest of the logs: the --budget of ${env.budget_usd:g} was spent (the next run goes on)")
    cost = None if env.judge is None else round(env.spent_usd, 4)
    if args.format == "json":
        sys.stdout.write(json.dumps({
            "experiment": outcome["id"], "path": str(outcome["path"]) if outcome["path"] else None,
            "previous": previous,
            "formats": counts.formats, "conversations_read": counts.read,
            "conversations_scored": len(outcome["scored"]),
            "runs": outcome["runs"], "already_scored": counts.already_scored, "before_since": counts.before_since,
            "not_sampled": counts.not_sampled, "budget_spent": env.spent, "judge_cost_usd": cost,
            "judge_cost_unpriced": env.unpriced, "failing": outcome["failing"]}, indent=2, ensure_ascii=False) + "\n")
        return
    formats = ", ".join(f"{n} file(s) {name}" for name, n in sorted(counts.formats.items())) or "no file"
    lines = [f"Read {counts.read} conversation(s) from {args.logs} ({formats})."]
    if left:
        lines.append("Not judged: " + "; ".join(left) + ".")
    if outcome["path"] is None:
        lines.append("Nothing new to score; no experiment written.")
    else:
        lines.append(f"Judged {len(outcome['scored'])} conversation(s): {outcome['runs']} run(s), "
                     f"{len(outcome['failing'])} failed" + (f"; judge cost ${cost:.4f}" if cost else "") + ".")
        for fail in outcome["failing"][:10]:  # the step (file:line and words), and what the conversation did
            message = [line.strip() for line in (fail["message"] or "").splitlines() if line.strip()]
            said = f"{message[0]} ({message[-1]})" if len(message) > 1 else "".join(message)
            lines.append(f"  FAILED {fail['conversation']} / {fail['scenario']}: {said}")
        if len(outcome["failing"]) > 10:
            lines.append(f"  ... and {len(outcome['failing']) - 10} more (fabtest view, fabtest show {outcome['id']})")
        lines.append(f"Experiment: {outcome['id']} ({outcome['path']})")
        lines.append(f"Compare with the score before it: fabtest-compare {previous} {outcome['id']}" if previous
                     else f"Compare it with a later score: fabtest-compare {outcome['id']} NEXT")
    from fabtest._internal.redaction import redact
    from fabtest._internal.terminal import inert

    sys.stdout.write(inert(redact("\n".join(lines) + "\n")))
