"""Per-pytest-run state, registered as a plugin object (the pytest-xdist pattern).

It builds the judge and simulator LLMs once, knows the project-level criteria and topics, expands
scenario sets, and on the controller records every scenario result and writes the experiment.
Soft verdicts that finish after their scenario travel to the recorder through ``late.py``; the
experiment and the console summary wait for them (README "Performance").
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fabtest import tracing
from fabtest.config.criteria import Criterion
from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.config.settings import Settings
from fabtest.engine.llms import stand_in
from fabtest.engine.scenario import LLMRoles
from fabtest.engine.topics import TopicGraph, TopicGraphError
from fabtest.errors import UsageError
from fabtest.experiment.late import LateVerdict
from fabtest.experiment.model import ScenarioResult
from fabtest.pytest_plugin.late_verdicts import LATE_PROPERTY, LateChannel
from fabtest.pytest_plugin.not_run import NotRun, allowed_kinds
from fabtest.pytest_plugin.streams import StreamGuard

#: workerinput key: the directory of the run's shared LLM slots (fabtest.llm.shared_limit).
LLM_SLOTS_KEY = "fabtest_llm_slots"


class FabtestSession:
    """One pytest run: settings, LLMs, scenario sets, and (on the controller) the experiment."""

    def __init__(self, config: pytest.Config, settings: Settings, *, coverage_floors: dict[str, float] | None = None
                 ) -> None:
        self.config = config
        self.settings = settings
        #: --fabtest-min-coverage: kind -> the least rate that passes the run
        self.coverage_floors = dict(coverage_floors or {})
        self.iterations = max(1, int(config.getoption("--fabtest-iterations") or 1))
        self.is_worker = hasattr(config, "workerinput")
        self.summary_text = ""
        self.notes: list[str] = []
        self._recorder: Any = None
        self._save_error: str | None = None  # a write to the experiment failed (a full disk): said once, at the end
        self._pending: dict[str, dict[str, Any]] = {}  # nodeid -> identity of a scenario started
        self._roles: LLMRoles | None = None
        self._roles_lock = threading.Lock()
        self._fake: Any = None
        self._sets: dict[tuple[str, str], list[ScenarioRecord]] = {}
        self._topics = self._project_topics()
        self._preflight_done = False
        self._probes: Any = None  # the pre-flight's LLM probes running beside the first scenarios
        #: node ids in collection order: the order results are written in, not the order they finished
        self._collected: list[str] = []
        self.retry_budget = self._make_retry_budget()
        self._sigterm = False  # our SIGTERM handler is in force (fabtest/_internal/signals.py)
        self.late = LateChannel()  # this process's soft verdicts judged after their scenario
        self._streams = StreamGuard()  # an agent closing sys.stdout must not end the session
        self._llm_slots: str | None = None  # controller: the slot directory its workers share
        self.not_run = NotRun(allowed_kinds(config, settings))  # scenarios that could not run (never green by accident)
        self._share_llm_slots()
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

    def fake_llm(self) -> Any:
        """The fake of ``--fabtest-fake-llm`` (built once per process), or None."""
        spec = self.config.getoption("--fabtest-fake-llm", None)
        if spec is None:
            return None
        if self._fake is None:
            from fabtest.testing.scripted import FakeLLM, load_fake_llm

            try:
                self._fake = load_fake_llm(spec, root=Path(str(self.config.rootpath))) if spec else FakeLLM()
            except UsageError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._fake

    def check_offline_llm(self) -> None:
        """``[tool.fabtest] offline_llm`` that does not import is a usage error before anything runs."""
        if self.settings.offline_llm:
            from fabtest._internal.targets import import_object
            from fabtest.engine.llms import is_offline_script, offline_script

            try:
                if is_offline_script(self.settings.offline_llm):
                    offline_script(self.settings, Path(str(self.config.rootpath)))
                else:
                    import_object(self.settings.offline_llm, where=f"{self.settings.source} [tool.fabtest] offline_llm",
                                  what="LLM")
            except UsageError as exc:
                raise pytest.UsageError(str(exc)) from None

    def llm_roles(self) -> LLMRoles:
        """Build the judge and simulator once: the ``--fabtest-fake-llm`` fake for both, else each
        role's provider, else ``[tool.fabtest] offline_llm``; a missing key leaves the role empty
        with a reason (precedence: README "Running without a key")."""
        with self._roles_lock:  # scenarios in flight at once (concurrency) ask from their own threads
            return self._llm_roles()

    def _llm_roles(self) -> LLMRoles:
        if self._roles is None:
            from fabtest.engine.llms import configured_llms

            limit = self.concurrency_share()
            fake = self.fake_llm()
            if fake is not None:
                roles = LLMRoles(judge=fake, simulator=fake, agent_model=stand_in(fake, always=True))
            else:
                try:
                    roles = configured_llms(self.settings, Path(str(self.config.rootpath)), max_concurrency=limit,
                                            retry_budget=self.retry_budget)
                except UsageError as exc:
                    raise pytest.UsageError(str(exc)) from None
            roles.judge, roles.simulator = tracing.traced(roles.judge, "judge"), tracing.traced(roles.simulator, "simulator")
            roles.executor = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="fabtest-judge")
            self._roles = roles
        return self._roles

    def _make_retry_budget(self) -> Any:
        """This process's share of the suite's retry budget (see fabtest.llm.retry_budget)."""
        from fabtest.llm.retry_budget import RETRY_BUDGET_FLOOR, RetryBudget

        workers = int(getattr(self.config, "workerinput", {}).get("workercount", 1) or 1)
        return RetryBudget(self.settings.retry_budget, floor=max(1, RETRY_BUDGET_FLOOR // workers))

    def concurrency_share(self) -> int:
        """Calls this process may have in flight: all of ``max_concurrency`` when the ``-n`` workers
        share one slot pool (fabtest.llm.shared_limit), else 1/N of it, so the whole suite stays
        inside the provider's limit, not N times over."""
        from fabtest.llm.limits import shares_across_processes

        workers = int(getattr(self.config, "workerinput", {}).get("workercount", 1) or 1)
        if shares_across_processes():
            return self.settings.max_concurrency
        return max(1, self.settings.max_concurrency // workers)

    def _share_llm_slots(self) -> None:
        """An xdist worker draws LLM slots from the pool its controller created (README "Performance")."""
        pool = getattr(self.config, "workerinput", {}).get(LLM_SLOTS_KEY)
        if pool:
            from fabtest.llm.limits import share_across_processes

            share_across_processes(pool)

    def llm_calls_in_flight(self) -> int | None:
        """The run's LLM calls in flight now: this process's, or under ``-n`` every worker's (slot
        files); None under ``-n`` where slots are not shared (no ``fcntl``: unknown here)."""
        if self._llm_slots is not None:
            from fabtest.llm.shared_limit import busy_slots

            return busy_slots(self._llm_slots)
        if self.config.pluginmanager.has_plugin("dsession"):
            return None
        from fabtest.llm.limits import calls_in_flight

        return calls_in_flight()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: one slot pool for the run, handed to every worker it starts."""
        from fabtest.llm import shared_limit

        if not shared_limit.available():
            return
        if self._llm_slots is None:
            self._llm_slots = str(shared_limit.create_pool_dir())
        node.workerinput[LLM_SLOTS_KEY] = self._llm_slots

    @staticmethod
    def salted(roles: LLMRoles, iteration: int) -> LLMRoles:
        """The iteration is part of the cache key, so repeated runs stay independent."""
        from fabtest.llm.cache import salted

        return LLMRoles(
            judge=salted(roles.judge, f"iteration-{iteration}") if roles.judge else None,
            simulator=salted(roles.simulator, f"iteration-{iteration}") if roles.simulator else None,
            judge_reason=roles.judge_reason, simulator_reason=roles.simulator_reason, executor=roles.executor,
            agent_model=roles.agent_model,
        )

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

        if session.items and self.config.getoption("--fabtest-fake-llm", None) is None:  # warm the LLMs meanwhile
            from fabtest.llm import warmup

            self.warm_up = warmup.start(self.settings, build=self.llm_roles)

        self._collected = [item.nodeid for item in session.items]
        if not self.is_worker and not self.config.pluginmanager.has_plugin("dsession") and preflight.enabled(self.config):
            self._probes = preflight.check_items(self, session.items, stop=lambda why: _stop(session, why))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        from fabtest.pytest_plugin import preflight

        if not self._collected:
            self._collected = list(ids)  # every worker collects the same items, in the same order
        if not self._preflight_done and preflight.enabled(self.config):
            self._preflight_done = True
            dsession = self.config.pluginmanager.get_plugin("dsession")
            self._probes = preflight.check_nodeids(self, list(ids), stop=lambda why: _stop(dsession, why))

    def role_llm(self, role: str) -> Any:
        """The run's own judge or simulator (the pre-flight probes it: same client, same connection)."""
        return getattr(self.llm_roles(), role)

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
        from fabtest.pytest_plugin.results import PENDING_PROPERTY, RESULT_PROPERTY

        if self.is_worker:
            return
        self.not_run.add(report)
        if self.config.getoption("--fabtest-no-results"):
            return
        for name, value in report.user_properties:
            if name == PENDING_PROPERTY and isinstance(value, dict):
                self._pending[report.nodeid] = value
            elif name == RESULT_PROPERTY:
                self._pending.pop(report.nodeid, None)
                result = ScenarioResult.model_validate(value)
                self._save("add", result)
            elif name == LATE_PROPERTY and isinstance(value, list):
                self._record_late(value)
        if report.failed and report.when not in ("setup", "call", "teardown"):
            # pytest-xdist reports a crashed worker's item with when="???" and no result of ours
            self._record_unfinished(report.nodeid, str(report.longrepr).strip().splitlines()[-1:])

    def _record_late(self, verdicts: list[dict[str, Any]]) -> None:
        for verdict in verdicts:
            late = LateVerdict.model_validate(verdict)
            self._save("add_late", late)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker's last soft verdicts come in its ``workeroutput`` (see late.py)."""
        late = getattr(node, "workeroutput", {}).get(LATE_PROPERTY)
        if isinstance(late, list) and late and not self.config.getoption("--fabtest-no-results"):
            self._record_late(late)

    def _finish_late(self, interrupted: bool) -> bool:
        """Wait for this process's soft verdicts still with the judge (not when interrupted: those
        stay skipped, with the reason) and hand them over; returns whether the run was interrupted."""
        if not interrupted:
            try:
                self.late.wait()
            except KeyboardInterrupt:  # Ctrl-C while waiting: record what is in
                interrupted = True
        if interrupted and self.late.outstanding:
            self.notes.append(f"fabtest: {self.late.outstanding} scenario(s) still had soft verdicts with the judge; "
                              "recorded as skipped (the run was interrupted)")
        ready = self.late.take()
        if self.is_worker:
            from fabtest._internal import redaction

            output: dict[str, Any] = getattr(self.config, "workeroutput")  # noqa: B009 - set by xdist on workers
            output[LATE_PROPERTY] = redaction.redact_obj(ready) if redaction.secrets() else ready
        elif ready and not self.config.getoption("--fabtest-no-results"):
            self._record_late(ready)
        return interrupted

    def _record_unfinished(self, nodeid: str, reason: list[str]) -> None:
        if nodeid in self._pending:
            value = dict(self._pending.pop(nodeid))
        elif nodeid.partition("::")[0].endswith(".feature"):
            value = _crashed_before_setup(nodeid)  # killed before its setup report left the worker
        else:
            return  # not a scenario (a plain test function in the project)
        if reason:
            value["failure_message"] = f"{value['failure_message']}: {reason[0]}"
        result = ScenarioResult.model_validate(value)
        self._save("add", result)

    def _save(self, method: str, *args: Any) -> Any:
        """``recorder.<method>(*args)``: one write to the experiment. A write that fails (a full disk)
        stops the recording, not the run: one line at the end says so and where the finished
        scenarios are (None then)."""
        if self._save_error is not None:
            return None
        try:
            return getattr(self._get_recorder(), method)(*args)
        except OSError as exc:
            from fabtest.experiment.recorder import cannot_save_message

            journal = self._recorder.journal if self._recorder is not None else None
            self._save_error = cannot_save_message(exc, journal)
            return None

    def shard(self) -> str | None:
        """``--fabtest-shard i/n``, else pytest-split's ``--splits n --group i``, else None."""
        from fabtest.experiment.merge import shard_from_options

        opt = self.config.getoption
        try:
            return shard_from_options(opt("--fabtest-shard", None), opt("--splits", None), opt("--group", None))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    def _get_recorder(self) -> Any:
        if self._recorder is None:
            from fabtest.experiment.recorder import Recorder

            opt = self.config.getoption
            results_dir = self.results_dir
            given_id = opt("--fabtest-experiment-id")
            if given_id and (results_dir / f"{given_id}.json").exists():
                self.notes.append(f"fabtest: experiment {given_id} existed and is replaced by this run")
            from fabtest.llm.factory import describe_llm

            try:
                roles: LLMRoles | None = self.llm_roles()
            except pytest.UsageError:  # already reported where the LLM was needed; not a reporting crash
                roles = None
            judge = describe_llm(roles.judge if roles else None)
            sim = describe_llm(roles.simulator if roles else None)
            self._recorder = Recorder(
                results_dir=results_dir, name=opt("--fabtest-experiment"), tags=opt("--fabtest-tag") or [],
                experiment_id=opt("--fabtest-experiment-id"), shard=self.shard(),
                judge_provider=judge[0], judge_model=judge[1], judge_note=judge[2],
                simulator_provider=sim[0], simulator_model=sim[1], simulator_note=sim[2],
                iterations=self.iterations, cwd=str(self.config.rootpath),
                prices={m: p.model_dump() for m, p in self.settings.prices.items()},
            )
            self._recorder.set_order(self._collected)
            rejudge = self.settings.judge.attribution_rejudge
            if rejudge and roles is not None and roles.judge is not None:
                from fabtest.judging.rejudge import attribution_rejudger

                self._recorder.set_rejudge(attribution_rejudger(roles.judge, rejudge))
        return self._recorder

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A run killed earlier left a journal: turn it into an interrupted experiment first."""
        self._warm_controller()
        if self.is_worker:
            return
        self.shard()  # a bad --fabtest-shard is a usage error before anything runs, in every mode
        if self.config.getoption("--fabtest-no-results"):
            return
        self._check_results_destination()
        from fabtest._internal.signals import sigterm_as_interrupt
        from fabtest.experiment.recorder import recover_pending

        self._sigterm = sigterm_as_interrupt()  # SIGTERM (CI, `timeout`) saves the finished scenarios, as Ctrl-C

        for _journal, path, error in recover_pending(self.results_dir):  # one bad journal never stops the rest
            self.notes.append(f"fabtest: recovered an interrupted run into {path}" if path else
                              f"fabtest: could not recover: {error}")
        self._claim_experiment_id()

    def _warm_controller(self) -> None:
        """The xdist controller probes the LLMs when the first worker has collected: load the SDK
        now, while its workers start, rather than then (the workers warm their own)."""
        from fabtest.pytest_plugin import preflight

        if (self.config.pluginmanager.has_plugin("dsession") and preflight.enabled(self.config)
                and self.config.getoption("--fabtest-fake-llm", None) is None):
            from fabtest.llm import warmup

            self.warm_up = warmup.start(self.settings, build=self.llm_roles)

    def _check_results_destination(self) -> None:
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

    def _claim_experiment_id(self) -> None:
        """A given id is claimed (its journal locked) now, so a concurrent run with it stops at once."""
        from fabtest.experiment.recorder import ExperimentInUse, cannot_save_message

        if self.config.getoption("--fabtest-experiment-id"):
            try:
                self._get_recorder()
            except ExperimentInUse as exc:
                raise pytest.UsageError(f"--fabtest-experiment-id: {exc}") from None
            except OSError as exc:  # a full disk before the first scenario: one line, nothing runs
                raise pytest.UsageError(cannot_save_message(exc, None)) from None

    @property
    def results_dir(self) -> Path:
        results_dir = Path(self.settings.results_dir)
        if not results_dir.is_absolute():
            results_dir = Path(str(self.config.rootpath)) / results_dir
        return results_dir

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from fabtest.pytest_plugin.spare_hypothesis import spare

        spare(self.config)  # before pytest's summary, which hypothesis's plugin would import it for
        if self._preflight_failed(session, exitstatus):  # what ran beside the failed probe is no experiment
            if self._recorder is not None:
                self._recorder.discard()
            return
        interrupted = self._finish_late(exitstatus == pytest.ExitCode.INTERRUPTED)
        if interrupted:  # Ctrl-C or SIGTERM while the last verdicts were awaited still exits "interrupted"
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.is_worker:
            return
        session.exitstatus = self.not_run.exit_status(session.exitstatus)
        if not interrupted:  # a worker that died mid-scenario: record what it was running
            for nodeid in list(self._pending):
                self._record_unfinished(nodeid, [])
        if self._recorder is None:
            self._report_save_error(session)
            return
        from fabtest.report.console import previous_experiment_id, render_summary

        recorder = self._recorder
        if not recorder.results and self._save_error is None:  # claimed early (a given id) but nothing ran
            recorder.discard()
            return
        path = self._save("finalise", interrupted)
        if path is None:
            self._report_save_error(session)
            return
        doc = recorder.document(interrupted=interrupted)
        shown = os.path.relpath(path, str(self.config.rootpath)) if path.is_relative_to(str(self.config.rootpath)) else path
        self.summary_text = render_summary(doc, shown, previous_experiment_id(recorder.results_dir, recorder.experiment_id))
        self._check_coverage(session, doc)

    def _check_coverage(self, session: pytest.Session, doc: dict[str, Any]) -> None:
        """--fabtest-min-coverage: a run under a floor fails (exit 1), saying which and by how much."""
        from fabtest.experiment.coverage import below_floors

        short = below_floors(doc.get("coverage") or {}, self.coverage_floors)
        if short:
            self.summary_text += "".join(f"FAILED: {line}\n" for line in short)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _report_save_error(self, session: pytest.Session) -> None:
        """The experiment could not be written: one line, and the run must not look green."""
        if self._save_error is None:
            return
        self.notes.append(f"fabtest: error: {self._save_error}")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from fabtest._internal.terminal import inert

        for line in self.not_run.summary_lines():  # first: a run that tested less than it says
            terminalreporter.write_line(inert(line), red=self.not_run.fails_run, yellow=not self.not_run.fails_run)
        for note in self.notes:
            terminalreporter.write_line(inert(note))
        if self.summary_text:
            terminalreporter.write_sep("=", "fabtest experiment")
            terminalreporter.write_line(inert(self.summary_text))

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
        if self._llm_slots is not None:
            from fabtest.llm.shared_limit import remove_pool_dir

            remove_pool_dir(self._llm_slots)
        if self._roles is not None and self._roles.executor is not None:
            self._roles.executor.shutdown(wait=False, cancel_futures=True)


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


def _crashed_before_setup(nodeid: str) -> dict[str, Any]:
    """A scenario whose worker died before saying which scenario it was: known by its node id only."""
    from fabtest.experiment.stable_id import stable_id
    from fabtest.pytest_plugin.results import crashed_message

    path, _, name = nodeid.partition("::")
    return ScenarioResult(
        id=stable_id(path, None, name), name=name, nodeid=nodeid, feature_file=path, passed=False,
        failure_type="error", failure_message=crashed_message(nodeid),
    ).model_dump(mode="json")
