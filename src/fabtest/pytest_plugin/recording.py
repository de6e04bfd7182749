"""The experiment of a pytest run, on the controller: results in, one file out.

Part of :class:`fabtest.pytest_plugin.session.FabtestSession`. Each scenario's result arrives in
its report's ``user_properties`` (so it survives pytest-xdist) and goes to the
:class:`fabtest.experiment.recorder.Recorder`, which spills it to disk at once; soft verdicts that
finish after their scenario follow (``late_verdicts.py``); a scenario whose worker died is
recorded from what its setup said. A write that fails stops the recording, never the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles
from fabtest.errors import UsageError
from fabtest.experiment.late import LateVerdict
from fabtest.experiment.model import ScenarioResult
from fabtest.pytest_plugin.late_verdicts import LATE_PROPERTY
from fabtest.pytest_plugin.llm_roles import SessionLLMs


class ExperimentRecording:
    """Collects the run's results into ``results/<id>.json`` (the recorder is made on first use)."""

    def __init__(self, config: pytest.Config, settings: Settings, llms: SessionLLMs, *, iterations: int,
                 notes: list[str]) -> None:
        self.config = config
        self.settings = settings
        self.llms = llms
        self.iterations = iterations
        self.notes = notes  # said at the end of the run (the summary's notes)
        self._recorder: Any = None
        self.save_error: str | None = None  # a write to the experiment failed (a full disk): said once, at the end
        self._pending: dict[str, dict[str, Any]] = {}  # nodeid -> identity of a scenario started
        self._finished: set[str] = set()  # node ids whose result was recorded
        #: node ids in collection order: the order results are written in, not the order they finished
        self.order: list[str] = []
        #: --fabtest-no-results: the results go to a temporary directory, read for the summary, then removed
        self.unsaved = bool(config.getoption("--fabtest-no-results", False))
        self._scratch: Path | None = None

    def add_report(self, report: pytest.TestReport) -> None:
        """A scenario's result, its identity as it started, or its late soft verdicts."""
        from fabtest.pytest_plugin.results import PENDING_PROPERTY, RESULT_PROPERTY

        for name, value in report.user_properties:
            if name == PENDING_PROPERTY and isinstance(value, dict):
                self._pending[report.nodeid] = value
            elif name == RESULT_PROPERTY:
                self._pending.pop(report.nodeid, None)
                self._finished.add(report.nodeid)
                result = ScenarioResult.model_validate(value)
                self.save("add", result)
            elif name == LATE_PROPERTY and isinstance(value, list):
                self.record_late(value)
        if report.failed and report.when not in ("setup", "call", "teardown"):
            # pytest-xdist reports a crashed worker's item with when="???" and no result of ours
            self.record_unfinished(report.nodeid, str(report.longrepr).strip().splitlines()[-1:])

    def record_late(self, verdicts: list[dict[str, Any]]) -> None:
        for verdict in verdicts:
            late = LateVerdict.model_validate(verdict)
            self.save("add_late", late)

    def record_unfinished(self, nodeid: str, reason: list[str]) -> None:
        if nodeid in self._pending:
            value = dict(self._pending.pop(nodeid))
        elif nodeid in self._finished:
            return  # its result arrived before the worker died (xdist still names the item it was on)
        elif nodeid.partition("::")[0].endswith(".feature"):
            value = _crashed_before_setup(nodeid)  # killed before its setup report left the worker
        else:
            return  # not a scenario (a plain test function in the project)
        if reason:
            value["failure_message"] = f"{value['failure_message']}: {reason[0]}"
        result = ScenarioResult.model_validate(value)
        self.save("add", result)

    def record_every_unfinished(self) -> None:
        """A worker that died mid-scenario: record what it was running."""
        for nodeid in list(self._pending):
            self.record_unfinished(nodeid, [])

    def save(self, method: str, *args: Any) -> Any:
        """``recorder.<method>(*args)``: one write to the experiment. A write that fails (a full disk)
        stops the recording, not the run: one line at the end says so and where the finished
        scenarios are (None then)."""
        if self.save_error is not None:
            return None
        try:
            return getattr(self.recorder(), method)(*args)
        except OSError as exc:
            from fabtest.experiment.recorder import cannot_save_message

            journal = self._recorder.journal if self._recorder is not None else None
            self.save_error = cannot_save_message(exc, journal)
            return None

    def shard(self) -> str | None:
        """``--fabtest-shard i/n``, else pytest-split's ``--splits n --group i``, else None."""
        from fabtest.experiment.merge import shard_from_options

        opt = self.config.getoption
        try:
            return shard_from_options(opt("--fabtest-shard", None), opt("--splits", None), opt("--group", None))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    def recorder(self) -> Any:
        if self._recorder is None:
            from fabtest.experiment.recorder import Recorder

            opt = self.config.getoption
            results_dir = self.results_dir
            given_id = opt("--fabtest-experiment-id")
            if given_id and (results_dir / f"{given_id}.json").exists():
                self.notes.append(f"fabtest: experiment {given_id} existed and is replaced by this run")
            from fabtest.llm.factory import describe_llm

            try:
                roles: LLMRoles | None = self.llms.llm_roles()
            except pytest.UsageError:  # already reported where the LLM was needed; not a reporting crash
                roles = None
            judge = describe_llm(roles.judge if roles else None)
            sim = describe_llm(roles.simulator if roles else None)
            judge_settings, simulator_settings = self.settings.verdict_settings(
                judge=bool(roles and roles.judge), simulator=bool(roles and roles.simulator))
            self._recorder = Recorder(
                results_dir=results_dir, name=opt("--fabtest-experiment"), tags=opt("--fabtest-tag") or [],
                experiment_id=opt("--fabtest-experiment-id"), shard=self.shard(),
                judge_provider=judge[0], judge_model=judge[1], judge_note=judge[2],
                simulator_provider=sim[0], simulator_model=sim[1], simulator_note=sim[2],
                judge_settings=judge_settings, simulator_settings=simulator_settings,
                iterations=self.iterations, cwd=str(self.config.rootpath),
                prices={m: p.model_dump() for m, p in self.settings.prices.items()},
            )
            self._recorder.set_order(self.order)
            rejudge = self.settings.judge.attribution_rejudge
            if rejudge and roles is not None and roles.judge is not None:
                from fabtest.judging.rejudge import attribution_rejudger

                self._recorder.set_rejudge(attribution_rejudger(roles.judge, rejudge))
        return self._recorder

    def check_destination(self) -> None:
        """Before any scenario runs: results can be saved, and no live run records the same id."""
        from fabtest.config.settings import check_results_dir
        from fabtest.experiment.recorder import experiment_id_in_use, in_use_message

        try:
            check_results_dir(self.results_dir)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        given_id = self.config.getoption("--fabtest-experiment-id")
        if given_id and experiment_id_in_use(self.results_dir, given_id):
            raise pytest.UsageError(f"--fabtest-experiment-id: {in_use_message(self.results_dir, given_id)}")

    def recover_interrupted(self) -> None:
        """A run killed earlier left a journal: turn it into an interrupted experiment first."""
        from fabtest.experiment.recorder import recover_pending

        for _journal, path, error in recover_pending(self.results_dir):  # one bad journal never stops the rest
            self.notes.append(f"fabtest: recovered an interrupted run into {path}" if path else
                              f"fabtest: could not recover: {error}")

    def claim_experiment_id(self) -> None:
        """A given id is claimed (its journal locked) now, so a concurrent run with it stops at once."""
        from fabtest.experiment.recorder import ExperimentInUse, cannot_save_message

        if self.config.getoption("--fabtest-experiment-id"):
            try:
                self.recorder()
            except ExperimentInUse as exc:
                raise pytest.UsageError(f"--fabtest-experiment-id: {exc}") from None
            except OSError as exc:  # a full disk before the first scenario: one line, nothing runs
                raise pytest.UsageError(cannot_save_message(exc, None)) from None

    @property
    def results_dir(self) -> Path:
        if self.unsaved:
            if self._scratch is None:
                import tempfile

                self._scratch = Path(tempfile.mkdtemp(prefix="fabtest-unsaved-"))
            return self._scratch
        results_dir = Path(self.settings.results_dir)
        if not results_dir.is_absolute():
            results_dir = Path(str(self.config.rootpath)) / results_dir
        return results_dir

    def discard(self) -> None:
        """What ran beside a failed pre-flight probe is no experiment; --fabtest-no-results's scratch goes too."""
        if self._recorder is not None:
            self._recorder.discard()
        if self._scratch is not None:
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)

    def finalise(self, interrupted: bool) -> tuple[Path, Any] | None:
        """Write the experiment: its path and the recorder, or None when there is nothing to write
        (no recorder, or claimed early for a given id but nothing ran) or the write failed
        (``save_error`` says why)."""
        if self._recorder is None:
            return None
        recorder = self._recorder
        if not recorder.results and self.save_error is None:  # claimed early (a given id) but nothing ran
            self.discard()
            return None
        if self.unsaved:  # nothing is written: the summary reads the recorder, then discard() removes it
            return self.results_dir, recorder
        path = self.save("finalise", interrupted)
        if path is None:
            return None
        return path, recorder


def _crashed_before_setup(nodeid: str) -> dict[str, Any]:
    """A scenario whose worker died before saying which scenario it was: known by its node id only."""
    from fabtest.engine.outcome import Outcome
    from fabtest.engine.result import ScenarioIdentity, scenario_result
    from fabtest.experiment.stable_id import stable_id
    from fabtest.pytest_plugin.results import crashed_message

    path, _, name = nodeid.partition("::")
    identity = ScenarioIdentity(feature="", name=name, nodeid=nodeid, feature_file=path)
    # its feature's name is unknown: the stable id is made of the file instead
    return scenario_result(identity, Outcome.failed("error", crashed_message(nodeid)), duration_s=0.0,
                           id=stable_id(path, None, name)).model_dump(mode="json")
