"""Per-pytest-run state, registered as a plugin object (the pytest-xdist pattern): the hooks.

It knows the project-level criteria and topics, expands scenario sets, runs the pre-flight, and
hands each job to a part of its own: the judge and simulator (``llm_roles.py``), the experiment on
the controller (``recording.py``) and the lines at the end of the run (``summary.py``). Soft
verdicts that finish after their scenario travel to the recorder through ``late.py``; the
experiment and the console summary wait for them (README "Performance").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from fabtest.config.criteria import Criterion
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.config.settings import Settings
from fabtest.engine.attachments import FileLoader
from fabtest.engine.topics import TopicGraph
from fabtest.errors import TopicGraphError, UsageError
from fabtest.pytest_plugin.late_verdicts import LATE_PROPERTY, LateChannel
from fabtest.pytest_plugin.llm_roles import LLM_SLOTS_KEY, SessionLLMs
from fabtest.pytest_plugin.not_run import NotRun, allowed_kinds
from fabtest.pytest_plugin.recording import ExperimentRecording
from fabtest.pytest_plugin.streams import StreamGuard
from fabtest.pytest_plugin.summary import RunSummary

__all__ = ["LLM_SLOTS_KEY", "FabtestSession"]


class FabtestSession:
    """One pytest run: settings, LLMs, scenario sets, and (on the controller) the experiment."""

    def __init__(self, config: pytest.Config, settings: Settings, *, coverage_floors: dict[str, float] | None = None
                 ) -> None:
        self.config = config
        self.settings = settings
        self.iterations = max(1, int(config.getoption("--fabtest-iterations") or 1))
        self.is_worker = hasattr(config, "workerinput")
        self._sets: dict[tuple[str, str], list[ScenarioRecord]] = {}
        self._topics = self._project_topics()
        self._preflight_done = False
        self._probes: Any = None  # the pre-flight's LLM probes running beside the first scenarios
        self._sigterm = False  # our SIGTERM handler is in force (fabtest/_internal/signals.py)
        self.late = LateChannel()  # this process's soft verdicts judged after their scenario
        self._streams = StreamGuard()  # an agent closing sys.stdout must not end the session
        self.not_run = NotRun(allowed_kinds(config, settings))  # scenarios that could not run (never green by accident)
        self.llms = SessionLLMs(config, settings)
        #: each file a step sends, read once for the run (checked at collection, then shared by every scenario)
        self.files = FileLoader(max_bytes=settings.max_file_bytes)
        self.summary = RunSummary(config, self.not_run, dict(coverage_floors or {}))
        self.recording = ExperimentRecording(config, settings, self.llms, iterations=self.iterations,
                                             notes=self.summary.notes)
        from fabtest._internal import quick_exit

        quick_exit.install()  # no final GC walk over the LLM SDK at exit: the tail of `-n` runs

    # -- configuration ---------------------------------------------------------------------------
    def project_criteria(self) -> dict[str, Criterion]:
        return {name: Criterion(name, text) for name, text in self.settings.criteria.items()}

    def project_topics(self) -> TopicGraph | None:
        return self._topics

    def _project_topics(self) -> TopicGraph | None:
        if not self.settings.topics:
            return None
        rows = [{"topic": r.topic, "characteristic": r.characteristic, "triggers": r.triggers, "next": r.next,
                 "max turns": "" if r.max_turns is None else str(r.max_turns)} for r in self.settings.topics]
        try:
            return TopicGraph.from_table(rows, where=f"{self.settings.source} [tool.fabtest] topics")
        except TopicGraphError as exc:
            raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: one slot pool for the run, handed to every worker it starts."""
        self.llms.configure_node(node)

    def scenario_set(self, name: str, feature_path: Path) -> list[ScenarioRecord]:
        """Records of ``scenarios/NAME.*`` (relative to the rootdir), loaded once per run."""
        from fabtest.config.scenario_sets import ScenarioSetError, load_scenario_set

        base = Path(str(self.config.rootpath)) / self.settings.scenarios_dir
        key = (name, str(base))
        if key not in self._sets:
            try:
                records = load_scenario_set(name, base)
            except ScenarioSetError as exc:
                raise UsageError(f"{feature_path}: @scenario_set:{name}: {exc}") from None
            self._sets[key] = records
        return self._sets[key]

    def collect_playbook(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        from fabtest.pytest_plugin.playbooks import collect_playbook

        return collect_playbook(self, file_path, parent)

    # -- pre-flight (once per run, as the first scenario starts) -----------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from fabtest.pytest_plugin import preflight

        if (session.items and self.config.getoption("--fabtest-fake-llm", None) is None
                and not self.config.option.collectonly):  # warm the LLMs meanwhile (a --collect-only calls none)
            from fabtest.llm import warmup

            self.warm_up = warmup.start(self.settings, build=self.llms.llm_roles)

        self.recording.order = [item.nodeid for item in session.items]
        if (not self.is_worker and not self.config.pluginmanager.has_plugin("dsession")
                and preflight.enabled(self.config)):
            self._probes = preflight.check_items(self, session.items, stop=lambda why: _stop(session, why))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        from fabtest.pytest_plugin import preflight

        if not self.recording.order:
            self.recording.order = list(ids)  # every worker collects the same items, in the same order
        if not self._preflight_done and preflight.enabled(self.config):
            self._preflight_done = True
            dsession = self.config.pluginmanager.get_plugin("dsession")
            self._probes = preflight.check_nodeids(self, list(ids), stop=lambda why: _stop(dsession, why))

    def _preflight_failed(self, session: pytest.Session, exitstatus: int) -> bool:
        """A failed LLM probe ends the run as a usage error, as a failure found before it would
        have (the line on stderr, exit 4); Ctrl-C does not wait for probes still out."""
        if self._probes is None:
            return False
        failure = self._probes.result(wait=exitstatus != pytest.ExitCode.INTERRUPTED)
        if failure is None:
            return False
        sys.stderr.write(f"ERROR: {failure}\n\n")
        sys.stderr.flush()
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return True

    # -- the experiment (controller only) ----------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        self.not_run.add(report)
        self.recording.add_report(report)  # --fabtest-no-results records to a temporary place, for the summary

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker's last soft verdicts come in its ``workeroutput`` (see late.py)."""
        late = getattr(node, "workeroutput", {}).get(LATE_PROPERTY)
        if isinstance(late, list) and late:
            self.recording.record_late(late)

    def settle_late(self) -> None:
        """Wait for the soft verdicts still with the judge and record them (``--fabtest-until-decided``
        looks at complete runs: their criteria and their cost)."""
        self.late.wait()
        if ready := self.late.take():
            self.recording.record_late(ready)

    def _finish_late(self, interrupted: bool) -> bool:
        """Wait for this process's soft verdicts still with the judge (not when interrupted: those
        stay skipped, with the reason) and hand them over; returns whether the run was interrupted."""
        if not interrupted:
            try:
                self.late.wait()
            except KeyboardInterrupt:  # Ctrl-C while waiting: record what is in
                interrupted = True
        if interrupted and self.late.outstanding:
            self.summary.notes.append(f"fabtest: {self.late.outstanding} scenario(s) still had soft verdicts with the "
                                      "judge; recorded as skipped (the run was interrupted)")
        ready = self.late.take()
        if self.is_worker:
            from fabtest._internal import redaction

            output: dict[str, Any] = getattr(self.config, "workeroutput")  # noqa: B009 - set by xdist on workers
            output[LATE_PROPERTY] = redaction.redact_obj(ready) if redaction.secrets() else ready
        elif ready:
            self.recording.record_late(ready)
        return interrupted

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A run killed earlier left a journal: turn it into an interrupted experiment first."""
        self._warm_controller()
        if self.is_worker:
            return
        self.recording.shard()  # a bad --fabtest-shard is a usage error before anything runs, in every mode
        if self.config.getoption("--fabtest-no-results"):
            return
        self.recording.check_destination()
        from fabtest._internal.signals import sigterm_as_interrupt

        self._sigterm = sigterm_as_interrupt()  # SIGTERM (CI, `timeout`) saves the finished scenarios, as Ctrl-C
        self.recording.recover_interrupted()
        self.recording.claim_experiment_id()

    def _warm_controller(self) -> None:
        """The xdist controller probes the LLMs when the first worker has collected: load the SDK
        now, while its workers start, rather than then (the workers warm their own)."""
        from fabtest.pytest_plugin import preflight

        if (self.config.pluginmanager.has_plugin("dsession") and preflight.enabled(self.config)
                and self.config.getoption("--fabtest-fake-llm", None) is None):
            from fabtest.llm import warmup

            self.warm_up = warmup.start(self.settings, build=self.llms.llm_roles)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from fabtest.pytest_plugin.spare_hypothesis import spare

        spare(self.config)  # before pytest's summary, which hypothesis's plugin would import it for
        if self._preflight_failed(session, exitstatus):  # what ran beside the failed probe is no experiment
            self.recording.discard()
            return
        interrupted = self._finish_late(exitstatus == pytest.ExitCode.INTERRUPTED)
        if interrupted:  # Ctrl-C or SIGTERM while the last verdicts were awaited still exits "interrupted"
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.is_worker:
            return
        session.exitstatus = self.not_run.exit_status(session.exitstatus)
        if not interrupted:  # a worker that died mid-scenario: record what it was running
            self.recording.record_every_unfinished()
        written = self.recording.finalise(interrupted)
        if written is None:
            self.summary.save_failed(session, self.recording.save_error)
            return
        path, recorder = written
        if self.recording.unsaved:
            self.summary.experiment_unsaved(session, recorder, interrupted)
            self.recording.discard()
            return
        self.summary.experiment_written(session, path, recorder, interrupted)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Any:
        """Around pytest's own summary, so fabtest's comes after its one line per failure (which
        would scroll it away after hundreds of failures), just above the final counts; pytest shows
        one failure block per distinct failure (folding.py)."""
        from fabtest.pytest_plugin.folding import folded_failures

        with folded_failures(terminalreporter) as folded:
            try:
                return (yield)
            finally:
                for line in folded:
                    terminalreporter.write_line(line, yellow=True)
                self.summary.write(terminalreporter)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self._streams.guard()  # the capture's streams are in place now

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Secrets (fabtest._internal.redaction) never reach the console: redact the failure text here."""
        report = yield
        if ready := self.late.take():  # soft verdicts judged since the last report leave with this one
            report.user_properties.append((LATE_PROPERTY, ready))
        from fabtest._internal import redaction

        _make_inert(report)
        if not redaction.secrets():
            return report
        # results travel in user_properties (to xdist's controller, --junitxml): redact them here too
        report.user_properties = [(name, redaction.redact_obj(value)) for name, value in report.user_properties]
        # captured stdout, stderr and log of the agent, and fabtest's transcript section
        report.sections = [(title, redaction.redact(content)) for title, content in report.sections]
        if report.longrepr is None:
            return report
        if isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
            path, line, reason = report.longrepr
            report.longrepr = (path, line, redaction.redact(str(reason)))
        else:
            report.longrepr = redaction.redact(str(report.longrepr))
        return report

    def close(self) -> None:
        from fabtest._internal import redaction
        from fabtest._internal.signals import restore_sigterm

        restore_sigterm(self._sigterm)
        self._streams.release()
        redaction.clear()
        # a run shorter than the SDK's import (a second or two) must not exit with the warm-up thread
        # still importing C extensions: a daemon thread inside an import at interpreter shutdown can
        # crash the process (SIGSEGV after the summary was printed, seen once in CI)
        warm_up = getattr(self, "warm_up", None)
        if warm_up is not None:
            warm_up.join(timeout=30)
        self.llms.close()


def _stop(session: Any, why: str) -> None:
    """Start no scenario after this (pytest's loop, the concurrency plugin and xdist's controller
    all read ``shouldstop``)."""
    if session is not None and not session.shouldstop:
        session.shouldstop = why


def _make_inert(report: pytest.TestReport) -> None:
    """Escape sequences an agent put in its reply or its exception are shown, not obeyed."""
    from fabtest._internal.terminal import inert

    report.sections = [(title, inert(content)) for title, content in report.sections]
    if isinstance(report.longrepr, tuple):
        path, line, reason = report.longrepr
        report.longrepr = (path, line, inert(str(reason)))
    elif report.longrepr is not None and "\x1b" in (text := str(report.longrepr)):
        report.longrepr = inert(text)  # as text: only when there is something to neutralise
