"""What fabtest says at the end of a pytest run: scenarios that could not run, notes, the experiment.

Part of :class:`fabtest.pytest_plugin.session.FabtestSession`. The summary of the written
experiment is rendered by :mod:`fabtest.report.console`; a coverage floor under its rate or an
experiment that could not be written fails the run here, so it never looks green.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fabtest.pytest_plugin.not_run import NotRun


class RunSummary:
    """The lines fabtest adds to pytest's terminal summary."""

    def __init__(self, config: pytest.Config, not_run: NotRun, coverage_floors: dict[str, float]) -> None:
        self.config = config
        self.not_run = not_run
        #: --fabtest-min-coverage: kind -> the least rate that passes the run
        self.coverage_floors = coverage_floors
        self.text = ""
        self.notes: list[str] = []

    def experiment_written(self, session: pytest.Session, path: Path, recorder: Any, interrupted: bool) -> None:
        """The experiment's summary (and its coverage floors) once it is written to ``path``."""
        from fabtest.experiment.robustness import attach_robustness
        from fabtest.report.console import previous_experiment_id, render_summary

        # an earlier audit's flags on the criteria this run used (the audit of this run comes later)
        doc = attach_robustness(recorder.document(interrupted=interrupted), recorder.results_dir)
        root = str(self.config.rootpath)
        shown = os.path.relpath(path, root) if path.is_relative_to(root) else path
        self.text = render_summary(doc, shown, previous_experiment_id(recorder.results_dir, recorder.experiment_id))
        self._check_coverage(session, doc)
        self._check_judged(session, doc)

    def experiment_unsaved(self, session: pytest.Session, recorder: Any, interrupted: bool) -> None:
        """``--fabtest-no-results``: the same summary, from results that were never written."""
        from fabtest.report.console import render_summary

        doc = recorder.document(interrupted=interrupted)
        self.text = render_summary(doc, unsaved="--fabtest-no-results")
        self._check_judged(session, doc)

    def _check_judged(self, session: pytest.Session, doc: dict[str, Any]) -> None:
        """Never green with every judged check skipped (docs/gates.md): the run counts as not run for
        want of ``llm`` (exit 6) unless ``allow_skip`` allows it."""
        from fabtest.experiment.stats import unjudged

        self.not_run.unjudged = unjudged(doc)
        session.exitstatus = self.not_run.exit_status(session.exitstatus)

    def _check_coverage(self, session: pytest.Session, doc: dict[str, Any]) -> None:
        """--fabtest-min-coverage: a run under a floor fails (exit 1), saying which and by how much."""
        from fabtest.experiment.coverage import below_floors

        short = below_floors(doc.get("coverage") or {}, self.coverage_floors)
        if short:
            self.text += "".join(f"FAILED: {line}\n" for line in short)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def save_failed(self, session: pytest.Session, error: str | None) -> None:
        """The experiment could not be written: one line, and the run must not look green."""
        if error is None:
            return
        self.notes.append(f"fabtest: error: {error}")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def write(self, terminalreporter: Any) -> None:
        from fabtest._internal.terminal import inert

        for line in self.not_run.summary_lines():  # first: a run that tested less than it says
            terminalreporter.write_line(inert(line), red=self.not_run.fails_run, yellow=not self.not_run.fails_run)
        for note in self.notes:
            terminalreporter.write_line(inert(note))
        if self.text:
            terminalreporter.write_sep("=", "fabtest experiment")
            terminalreporter.write_line(inert(self.text))
