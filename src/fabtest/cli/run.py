"""``fabtest run FILE...``: run playbooks outside pytest, with the same summary and experiment file.

Exit codes: 0 when every playbook passed, 1 when any failed or was skipped (no LLM configured:
nothing was verified), 2 for usage errors (a bad playbook, a missing ``env`` variable, a bad
``link_paths`` entry, bad settings, a bad ``--experiment-id``, a results directory that cannot be
written, a failed pre-flight check): one line on stderr, before anything runs; 130 when interrupted
(Ctrl-C or SIGTERM: the finished playbooks are saved, marked interrupted).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal.redaction import redact
from fabtest._internal.terminal import inert
from fabtest.engine.llms import configured_llms
from fabtest.engine.scenario import LLMRoles
from fabtest.errors import UsageError
from fabtest.experiment.recorder import cannot_save_message

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["register", "run_cli", "run_command"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "fabtest run"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Run playbook files (JSON/YAML) against the agent.")
    p.add_argument("files", nargs="+", metavar="FILE", help="playbook files (.json, .yaml, .yml)")
    p.add_argument("--results-dir", default=None,
                   help="where the experiment and traces go ([tool.fabtest] results_dir)")
    p.add_argument("--experiment", default=None, metavar="NAME", help="a name for this experiment")
    p.add_argument("--experiment-id", default=None, metavar="ID", help="use this experiment id")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the experiment (repeatable)")
    p.add_argument("--no-results", action="store_true", help="do not write an experiment file nor traces")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the pre-flight check of the agent and the LLMs before the first playbook")
    p.add_argument("--agent", default=None, metavar="MODULE:ATTR",
                   help="agent factory (default: $FABTEST_PLAYBOOK_AGENT, [tool.fabtest] playbook_agent, Gemini CLI)")
    return p


def _error(message: str) -> int:
    print(f"{PROG}: error: {' '.join(redact(str(message)).split())}", file=sys.stderr)
    return EXIT_USAGE


def _error_lines(message: str) -> int:
    """Several one-line problems (the pre-flight's), each on its own line."""
    for line in message.splitlines():
        print(f"{PROG}: error: {line}", file=sys.stderr)
    return EXIT_USAGE


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fabtest run`` (``argv`` without the ``run`` word)."""
    from fabtest.config.settings import Settings, check_results_dir
    from fabtest.experiment.recorder import check_experiment_id
    from fabtest.playbook.load import PlaybookError, load_playbook
    from fabtest.playbook.run import run_playbook
    from fabtest.playbook.secrets import interpolate
    from fabtest.playbook.workspace import Workspace

    try:
        args = _parser().parse_args(list(argv if argv is not None else sys.argv[1:]))
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    root = Path.cwd()
    try:
        check_experiment_id(args.experiment_id, "--experiment-id")
        settings = Settings.load(root)
    except UsageError as exc:
        return _error(str(exc))
    # `agent = "pkg.bot:Bot"` names a module of the project: importable from the project root, as
    # under pytest (which puts the rootdir on sys.path too), without PYTHONPATH=.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))

    # Everything that can be wrong with the input is found before the first call.
    from fabtest._internal.targets import import_object
    from fabtest.agents.registry import DEFAULT_PLAYBOOK_AGENT, playbook_agent_target

    agent = playbook_agent_target(args.agent, settings=settings)
    where = "fabtest run --agent" if args.agent else "playbook agent"
    if agent != DEFAULT_PLAYBOOK_AGENT:
        try:
            import_object(agent, where=where)
        except UsageError as exc:
            return _error(str(exc))
    playbooks = []
    for file in args.files:
        try:
            playbook = load_playbook(file)
            interpolate(playbook, os.environ)
            checker = Workspace(playbook.link_paths, repo_root=root, source=playbook.source)
            for index, rel in enumerate(playbook.link_paths):
                checker.resolve_link(index, rel)
        except PlaybookError as exc:
            return _error(str(exc))
        playbooks.append(playbook)
    results_dir = Path(args.results_dir or os.environ.get("FABTEST_RESULTS_DIR") or settings.results_dir)
    if not results_dir.is_absolute():
        results_dir = root / results_dir
    recorder: Any = None
    if not args.no_results:  # a configuration error, so before the pre-flight's reachability checks
        try:
            check_results_dir(results_dir, "results_dir")
        except UsageError as exc:
            return _error(str(exc))
    from fabtest.engine.preflight import Needs, PreflightFailed, begin_preflight

    preflight = None  # the LLM probe answers while the first playbook's agent starts (run_playbook's ready)
    if not args.no_preflight:
        needs = Needs(agents={where: agent}, judge=True, simulator=True)
        try:
            preflight = begin_preflight(settings, needs, cache_mode=settings.llm_cache, skip_option="--no-preflight")
        except UsageError as exc:
            return _error_lines(str(exc))
    try:
        roles = configured_llms(settings, root)
    except UsageError as exc:  # an offline_llm that does not import
        return _error(str(exc))
    from fabtest.experiment.export import new_experiment_id

    # a new id now: the first playbook starts its agent before the recorder exists (see begin)
    experiment_id = args.experiment_id or (None if args.no_results else new_experiment_id())

    def begin(number: int, progress: str) -> None:
        """``run_playbook``'s ``ready``: the first playbook's agent is starting; the pre-flight's LLM
        probe must have answered and the recorder must open before its first step (a failure of
        either is this run's usage error, with nothing of it written), then the progress line."""
        nonlocal recorder
        if number == 1:
            if preflight is not None:
                preflight()
            if not args.no_results:
                from fabtest._internal.files import remove_stale_temp_files

                remove_stale_temp_files(results_dir)  # left by a run killed mid-write
                recorder = _open_recorder(args, settings, roles, results_dir, root, experiment_id)
        print(progress, flush=True)

    from fabtest._internal.signals import restore_sigterm, sigterm_as_interrupt

    failed = skipped = 0
    unsaved: list[Any] = []  # --no-results: the results kept in memory, for the summary only
    total = len(playbooks)
    interrupted = False
    sigterm = sigterm_as_interrupt()  # SIGTERM ends the run like Ctrl-C: the finished playbooks are saved
    try:
        for number, playbook in enumerate(playbooks, start=1):
            shown = _relative(playbook.source or "", root)
            progress = f"[{number}/{total}] {playbook.name} ({shown}) ..."
            try:
                outcome = run_playbook(playbook, agent_factory=args.agent, judge_llm=roles.judge,
                                       simulator_llm=roles.simulator, repo_root=root, results_dir=results_dir,
                                       settings=settings, experiment_id=experiment_id, nodeid=shown,
                                       write_trace=not args.no_results,
                                       ready=functools.partial(begin, number, progress))
            except PreflightFailed as exc:  # nothing ran and nothing was written
                return _error_lines(str(exc))
            except UsageError as exc:  # a playbook's (PlaybookError) or the recorder's
                return _error(str(exc))
            if outcome.skipped:
                skipped += 1
                reason = outcome.skip_reason or ""
                reasons = [why for r, why in (("judge", roles.judge_reason), ("simulator", roles.simulator_reason))
                           if r in reason and why]
                print(f"    SKIPPED: {reason}" + (f" ({'; '.join(reasons)})" if reasons else ""), flush=True)
            elif outcome.passed:
                print(f"    PASSED ({len(outcome.conversation.turns)} turns, {outcome.duration_s:.1f}s)", flush=True)
            else:
                failed += 1
                message = inert(redact(outcome.failure_message or "")).replace("\n", "\n    ")
                print(f"    FAILED [{outcome.failure_type}]: {message}", flush=True)
            if recorder is not None and outcome.result is not None:
                recorder.add(outcome.result)
            elif outcome.result is not None:
                unsaved.append(outcome.result)
    except OSError as exc:  # a full disk: the playbooks finished so far are in the journal
        return _error(cannot_save_message(exc, recorder.journal if recorder is not None else None))
    except KeyboardInterrupt:
        interrupted = True
        print(f"{PROG}: interrupted; the finished playbooks are saved", file=sys.stderr, flush=True)
    finally:
        restore_sigterm(sigterm)
        _close_roles(roles)
    if recorder is not None:
        from fabtest.experiment.robustness import attach_robustness
        from fabtest.report.console import previous_experiment_id, render_summary

        try:
            path = recorder.finalise(interrupted=interrupted)
        except OSError as exc:
            return _error(cannot_save_message(exc, recorder.journal))
        doc = attach_robustness(recorder.document(interrupted=interrupted), results_dir)
        previous = previous_experiment_id(results_dir, recorder.experiment_id)
        text = render_summary(doc, _relative(str(path), root), previous)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    elif unsaved:
        sys.stdout.write(_unsaved_summary(unsaved, args, roles, experiment_id, interrupted))
    if interrupted:
        return EXIT_INTERRUPTED
    passed = total - failed - skipped
    print(f"{PROG}: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    return EXIT_OK if failed == 0 and skipped == 0 else EXIT_FAILED


def _unsaved_summary(results: list[Any], args: argparse.Namespace, roles: LLMRoles, experiment_id: str | None,
                     interrupted: bool) -> str:
    """``--no-results``: the console summary of the results kept in memory (nothing was written, so
    it cannot come from a file), its last lines saying why nothing was saved."""
    from fabtest.experiment.export import build_document
    from fabtest.experiment.model import ExperimentInfo
    from fabtest.experiment.recorder import utc_timestamp
    from fabtest.llm.factory import describe_llm
    from fabtest.report.console import render_summary

    judge, sim = describe_llm(roles.judge), describe_llm(roles.simulator)
    info = ExperimentInfo(id=experiment_id or "unsaved", timestamp=utc_timestamp(), name=args.experiment,
                          tags=list(args.tag or []), judge_provider=judge[0], judge_model=judge[1], judge_note=judge[2],
                          simulator_provider=sim[0], simulator_model=sim[1], simulator_note=sim[2],
                          interrupted=interrupted)
    text = render_summary(build_document(info, results), unsaved="--no-results")
    return text if text.endswith("\n") else text + "\n"


def _open_recorder(args: argparse.Namespace, settings: Any, roles: LLMRoles, results_dir: Path, root: Path,
                   experiment_id: str | None) -> Any:
    """The experiment's recorder; UsageError (one line) when the id is in use or the disk is full."""
    from fabtest.experiment.recorder import Recorder
    from fabtest.llm.factory import describe_llm

    judge, sim = describe_llm(roles.judge), describe_llm(roles.simulator)
    recorded = settings.verdict_settings(judge=roles.judge is not None, simulator=roles.simulator is not None)
    if args.experiment_id and (results_dir / f"{args.experiment_id}.json").exists():
        print(f"{PROG}: experiment {args.experiment_id} exists and is replaced by this run", file=sys.stderr)
    try:
        return Recorder(
            results_dir=results_dir, name=args.experiment, tags=args.tag, experiment_id=experiment_id,
            judge_provider=judge[0], judge_model=judge[1], judge_note=judge[2],
            simulator_provider=sim[0], simulator_model=sim[1], simulator_note=sim[2], cwd=str(root),
            prices={m: p.model_dump() for m, p in settings.prices.items()},
            judge_settings=recorded[0], simulator_settings=recorded[1],
        )
    except UsageError as exc:  # another live run records this id
        raise UsageError(f"--experiment-id: {exc}") from None
    except OSError as exc:  # a full disk before the first playbook
        raise UsageError(cannot_save_message(exc, None)) from None


def _close_roles(roles: LLMRoles) -> None:
    for llm in (roles.judge, roles.simulator):
        close = getattr(llm, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing must not hide the run's outcome
                pass


def _relative(path: str, root: Path) -> str:
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def run_command(argv: Sequence[str]) -> int:
    """``fabtest run ...``: the playbook runner parses its own options (argparse's REMAINDER can't)."""
    return int(run_cli(list(argv)) or 0)


def register(sub: SubParsers) -> None:
    """``fabtest run`` in the command list and its help; ``main`` hands the words after it to :func:`run_command`."""
    p = sub.add_parser("run", help="run playbook files", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="FILE")
    p.set_defaults(func=lambda a: run_command(a.args))
