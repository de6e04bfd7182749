"""A scenario's ending, translated into pytest's report (after each phase's report is made).

The engine finishes the scenario and says how it ended (:mod:`fabtest.engine.outcome`,
docs/explanation/architecture.md); this module turns that into pytest's words (passed, failed
with a short message and the transcript, skipped with its reason) and attaches the engine's
result (:mod:`fabtest.engine.result`) to the report as plain data, so it survives pytest-xdist
and the controller records it (``recording.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.exceptions import StepDefinitionNotFoundError

from fabtest import tracing
from fabtest.agents.boundary import agent_traceback
from fabtest.engine import transcript
from fabtest.engine.outcome import Outcome, conclude, failure_message
from fabtest.engine.result import build_result
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import AgentError, FabtestError, UsageError, failure_type_of
from fabtest.experiment import file_store
from fabtest.pytest_plugin import hints, not_run
from fabtest.pytest_plugin.collect import template_of
from fabtest.pytest_plugin.results import PENDING_PROPERTY, RESULT_PROPERTY, crashed_message, identity_of
from fabtest.pytest_plugin.stash_keys import SPAN_KEY, STATE_KEY, STEP_KEY, WHERE_KEY

__all__ = ["spare_traceback", "translate"]

_SHORT = (FabtestError, StepDefinitionNotFoundError)


@contextmanager
def spare_traceback(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """While pytest makes the report of a failure that :func:`translate` words itself (a
    fabtest error or an unmatched step), the item's ``repr_failure`` gives that short message:
    pytest's own traceback, thrown away after, parses the whole source file of every frame
    (``getstatementrange_ast``), about half a second of CPU for each failing scenario."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if call.when != "call" or not isinstance(exc, _SHORT) or not isinstance(item, pytest.Function):
        yield
        return

    def short(excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return _short_message(item, excinfo.value)

    item.repr_failure = short  # type: ignore[method-assign]
    try:
        yield
    finally:
        del item.repr_failure


def translate(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """Why a scenario did not run, who is running (setup), and how it ended (call)."""
    not_run.tag_report(report, call)
    if call.when == "setup" and template_of(getattr(item, "obj", None)) is not None:
        _report_setup(item, report, call.duration)
    elif call.when == "call":
        _report_call(item, report, call)


def _report_setup(item: pytest.Item, report: pytest.TestReport, duration: float) -> None:
    if report.passed:
        # Who is running, so the controller can record the scenario even if its worker dies.
        message = crashed_message(item.nodeid)
        prop = PENDING_PROPERTY
    elif report.failed:  # a fixture (fabtest_agent, a server) failed before the first step
        crash = getattr(report.longrepr, "reprcrash", None)
        message = f"{item.nodeid}: setup failed" + (f": {crash.message}" if crash is not None else "")
        prop = RESULT_PROPERTY
    else:  # skipped before it ran (a skip marker from a tag or a conftest): recorded with its reason
        skipped = Outcome("skipped", skip_reason=_skip_reason(report))
        result = build_result(identity_of(item), None, skipped, duration_s=duration)
        report.user_properties.append((RESULT_PROPERTY, result.model_dump(mode="json")))
        return
    result = build_result(identity_of(item), None, Outcome.failed("error", message), duration_s=duration)
    report.user_properties.append((prop, result.model_dump(mode="json")))


def _report_call(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """The engine finishes the scenario and says how it ended; this turns that into the pytest report."""
    state = item.stash.get(STATE_KEY, None)
    exc = call.excinfo.value if call.excinfo is not None else None
    if state is not None and not isinstance(exc, (pytest.skip.Exception, KeyboardInterrupt)):
        ending = conclude(state, exc)
        if exc is None and ending is not None:  # the late work failed a scenario whose steps passed
            exc = ending
            report.outcome = "failed"
        elif exc is not None and ending is not exc and isinstance(ending, FabtestError) and ending.skips:
            exc = ending  # a failure on a conversation its fidelity review voided: not run (and run again)
            _skipped(item, report, ending, state)
    # a scenario or test function; other items (playbooks) word their own failure in repr_failure
    if exc is not None and isinstance(exc, _SHORT) and report.outcome == "failed" and isinstance(item, pytest.Function):
        report.longrepr = _short_message(item, exc)
        if isinstance(exc, AgentError) and item.config.option.tbstyle == "long" and (frames := agent_traceback(exc)):
            report.sections.append(("fabtest agent traceback", frames))  # --tb=long: the failing line in the agent
    if state is not None and report.outcome == "failed" and state.conversation.turns \
            and not isinstance(exc, UsageError):  # a bad input is about the file, not the conversation
        report.sections.append(("fabtest conversation", transcript.render(state.conversation)))
    if state is None and template_of(getattr(item, "obj", None)) is None:
        return  # not a scenario (an ordinary test, or a pytest-bdd scenario without fabtest steps)
    result = build_result(identity_of(item), state, _outcome(item, report, exc), duration_s=call.duration)
    if state is not None:
        keep_files(state)  # the bytes of its files, once per content, beside the experiment
    tracing.end_scenario(item.stash.get(SPAN_KEY, None), result)
    report.user_properties.append((RESULT_PROPERTY, result.model_dump(mode="json")))


def _skipped(item: pytest.Item, report: pytest.TestReport, exc: FabtestError, state: ScenarioState) -> None:
    """The report of a run that ended as not run after its steps (a late fidelity review voided it)."""
    report.outcome = "skipped"
    path, line, _ = item.location
    report.longrepr = (path, (line or 0) + 1, f"Skipped: {exc}")
    if state.review is None or not state.review.attempts_left:  # not run again: it counts as not run
        report.user_properties.append((not_run.NOT_RUN_PROPERTY, getattr(exc, "not_run_kind", "simulator")))


def _outcome(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None) -> Outcome:
    """pytest's verdict in the engine's words (a skip's reason, a failure's type and message)."""
    if report.outcome == "skipped":
        return Outcome("skipped", skip_reason=_skip_reason(report))
    if report.outcome == "passed":
        return Outcome("passed")
    if exc is None:
        return Outcome.failed(None, None)
    return Outcome.failed(failure_type_of(exc), _short_message(item, exc))


def _short_message(item: pytest.Item, exc: BaseException) -> str:
    """The failure as the engine words it, or pytest-bdd's unmatched step with what to write instead."""
    if isinstance(exc, StepDefinitionNotFoundError) and hints.UNMATCHED_KEY in item.stash:
        return item.stash[hints.UNMATCHED_KEY]
    if isinstance(exc, StepDefinitionNotFoundError):
        location, unmatched = item.stash.get(WHERE_KEY, ""), item.stash.get(STEP_KEY, "")
        return (f"{location}: no step definition matches this step"
                f" ({unmatched}). Expected one of the steps `fabtest steps` lists,"
                " or a step of your own (pytest-bdd @given/@when/@then) in a conftest.py")
    return failure_message(exc, where=item.stash.get(WHERE_KEY, ""), step=item.stash.get(STEP_KEY, ""))


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def keep_files(state: ScenarioState) -> None:
    """The conversation's files under ``results/files/<sha256>`` (the experiment lists them, never the
    bytes); a full disk is a warning, not a failed scenario."""
    files = file_store.conversation_files(state.conversation)
    if not files:
        return
    results_dir = Path(state.settings.results_dir)
    try:
        file_store.keep(results_dir if results_dir.is_absolute() else state.rootdir / results_dir, files)
    except OSError as exc:
        import warnings

        warnings.warn(f"fabtest could not keep the conversation's files under {results_dir}: {exc}", stacklevel=1)
