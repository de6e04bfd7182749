"""Several scenarios in flight at once in one pytest process (``concurrency = N``, docs/concurrency.md).

An evaluation waits for LLMs almost all the time. With ``concurrency`` above 1 this plugin takes
over ``pytest_runtest_protocol`` for fabtest scenarios and playbooks: the setup phase runs on the
main thread as always, then only the call phase (the conversation) runs on a thread of its own and
the hook returns at once, blocking only while N scenarios are in flight. As calls finish, the main
thread makes their reports, runs their teardown and logs them, so everything that reports
(terminal, JUnit XML, xdist's channel to the controller, fabtest's recorder) stays on one thread.
It works the same inside an xdist worker, whose loop calls the protocol hook per item.

What keeps the scenarios in flight apart is :mod:`~fabtest.pytest_plugin.concurrency.isolation` (fixtures,
setup state) and :mod:`~fabtest.pytest_plugin.concurrency.routing` (captured output). A scenario that cannot
share the process (marked ``fabtest_serial``, or using a fixture that changes process-wide state)
runs alone once the others have finished, and the terminal summary says which and why. With
``-x``/``--maxfail`` no scenario starts after the failure; those in flight finish and are
reported. On Ctrl-C or SIGTERM nothing new starts, CLI agents' process groups are killed, and the
scenarios that had finished are reported; the others are left unreported (their workers are daemon
threads) and the experiment marks the run interrupted.
"""

from __future__ import annotations

import contextvars
import queue
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from _pytest.runner import CallInfo, check_interactive_exception, get_reraise_exceptions
from _pytest.tmpdir import tmppath_result_key

from fabtest._internal.threads import ReusableThreads
from fabtest.pytest_plugin.collect import template_of
from fabtest.pytest_plugin.concurrency.isolation import (
    UNSHAREABLE_FIXTURES,
    ConcurrentSetupState,
    isolate_item,
    quick_request_fixturedefs,
    serialized_step_lookup,
)
from fabtest.pytest_plugin.concurrency.routing import Capture, OutputRouter
from fabtest.pytest_plugin.playbooks import PlaybookItem
from fabtest.pytest_plugin.stash_keys import STATE_KEY

__all__ = ["ALONE_PROPERTY", "ConcurrentScenarios", "concurrency_blocker"]

#: user property of a report whose scenario ran alone: why (the terminal summary lists them)
ALONE_PROPERTY = "fabtest_ran_alone"
SERIAL_MARKER = "fabtest_serial"


def concurrency_blocker(config: pytest.Config) -> str | None:
    """Why this whole run cannot run scenarios concurrently (an interactive or setup-only option)."""
    for option, why in (("usepdb", "--pdb"), ("trace", "--trace"), ("setuponly", "--setup-only"),
                        ("setupplan", "--setup-plan"), ("setupshow", "--setup-show")):
        if config.getoption(option, False):
            return f"{why} debugs one test at a time"
    return None


@dataclass
class _Done:
    """A call phase that finished on its thread, waiting for the main thread to report it."""

    item: pytest.Item
    call: CallInfo[None] | BaseException  # an exception pytest lets through a test, to raise on the main thread
    capture: Capture


class ConcurrentScenarios:
    """The plugin registered when ``concurrency`` is above 1."""

    def __init__(self, config: pytest.Config, limit: int) -> None:
        self.config = config
        self.limit = limit
        self.in_flight = 0
        self.finished: queue.SimpleQueue[_Done] = queue.SimpleQueue()
        self.alone: dict[str, str] = {}  # nodeid -> why it ran alone (also from xdist workers' reports)
        self.max_in_flight = 0  # the most scenarios in flight at once so far (for progress and benchmarks)
        self._upcoming: pytest.Item | None = None
        self._router = OutputRouter(config)
        self._routing = False
        self._hooks: dict[tuple[str, frozenset[int]], Callable[..., Any]] = {}
        self._worker: Any = False  # xdist's WorkerInteractor in a worker, None elsewhere (False: not looked up)
        self._index: dict[int, int] | None = None
        self._threads = ReusableThreads("fabtest-scenario")  # call phases; the main thread never waits for a start

    # -- session ---------------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        session._setupstate = ConcurrentSetupState()  # after pytest's runner made its plain one

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        with serialized_step_lookup(), quick_request_fixturedefs(), _fewer_collections():
            try:
                return (yield)
            except (KeyboardInterrupt, SystemExit):
                self._interrupted(session)
                raise
            finally:
                self._drain(session)
                self._threads.close()
                if self._routing:
                    self._router.stop()
                    self._routing = False

    # -- items -----------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        session = item.session
        self._upcoming = item
        self._collect(block=False)
        why = self._why_alone(item)
        if why is not None:
            self._drain(session)
            if why:
                self.alone[item.nodeid] = why
            self._upcoming = nextitem
            return None  # pytest's own protocol, with nothing else in flight
        while self.in_flight >= self.limit:
            self._collect(block=True)
        if session.shouldfail or session.shouldstop:
            return True  # -x / --maxfail: nothing new starts; pytest's loop stops after this item
        self._start(item)
        self._upcoming = nextitem
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A scenario's state (and what it depends on: ``tmp_path``, the agent fixture, the session's
        LLMs) is set up here, on the main thread, rather than by its first step on the scenario's
        thread: pytest's own helpers behind them (``tmp_path_factory`` making its base directory)
        are not safe to call from several threads at once."""
        if isinstance(item.session._setupstate, ConcurrentSetupState) and item.nodeid not in self.alone \
                and template_of(getattr(item, "obj", None)) is not None and hasattr(item, "_request"):
            item._request.getfixturevalue("fabtest_scenario")

    def _why_alone(self, item: pytest.Item) -> str | None:
        """None: the item may run concurrently; "": it runs alone without a word (not a scenario);
        otherwise the reason the run reports."""
        if template_of(getattr(item, "obj", None)) is None and not isinstance(item, PlaybookItem):
            return ""
        marker = item.get_closest_marker(SERIAL_MARKER)
        if marker is not None:
            return _marker_reason(marker)
        for name in getattr(item, "fixturenames", ()):
            if name in UNSHAREABLE_FIXTURES:
                return UNSHAREABLE_FIXTURES[name]
        return None

    def _start(self, item: pytest.Item) -> None:
        ihook = item.ihook
        isolate_item(item)
        if not self._routing:  # before the first setup: setup and teardown output is routed too
            self._router.start()
            self._routing = True
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        try:
            setup = self._phase(item, "setup")
        except BaseException:
            _no_report_yet(item)
            raise
        marker = item.get_closest_marker(SERIAL_MARKER)
        if not setup.passed or marker is not None:  # a fixture may mark its scenario serial during setup
            if setup.passed:
                self.alone[item.nodeid] = _marker_reason(marker, by=" by a fixture")
                self._drain(item.session)
                self._phase(item, "call")  # on this thread, alone, with the same hooks as its setup
            self._teardown(item)
            return
        state = self._setup_state(item)
        state.detach(item)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        context = contextvars.copy_context()
        self._threads.submit(context.run, self._call, item, self._hook(item, "pytest_runtest_call"),
                             name=f"fabtest-scenario {item.name}")

    def _call(self, item: pytest.Item, hook: Callable[..., Any]) -> None:
        """The call phase, on the scenario's thread, without pytest's process-wide capture."""
        capture = Capture()
        capture.activate()

        def steps() -> None:
            hook(item=item)
            _send_pending_judging(item)

        try:
            call: CallInfo[None] | BaseException = CallInfo.from_call(
                steps, when="call", reraise=get_reraise_exceptions(item.config))
        except BaseException as exc:  # pytest.exit() and the like: raised on the main thread
            call = exc
        self.finished.put(_Done(item, call, capture))

    def _hook(self, item: pytest.Item, name: str) -> Callable[..., Any]:
        """The hook ``name`` (a phase: ``pytest_runtest_setup``, ``_call``, ``_teardown``) as the item's
        hook proxy sees it (its conftests), minus pytest's capture and logging plugins, whose
        per-test state is process-wide (the output is routed instead: ``routing.py``)."""
        pm = item.config.pluginmanager
        remove = set(getattr(item.ihook, "remove_mods", ()))
        remove |= {p for p in (pm.get_plugin("capturemanager"), pm.get_plugin("logging-plugin")) if p is not None}
        key = (name, frozenset(id(p) for p in remove))
        if key not in self._hooks:
            self._hooks[key] = pm.subset_hook_caller(name, remove_plugins=remove)
        return self._hooks[key]

    def _phase(self, item: pytest.Item, when: Literal["setup", "call", "teardown"], **kwargs: Any) -> pytest.TestReport:
        """pytest's ``call_and_report`` for a phase on the main thread (a setup or teardown), its output caught
        by the router as a call phase's is (the "Captured ... setup" sections) rather than by
        pytest's global capture: resuming and suspending that swaps file descriptors (8 ``dup2`` a
        scenario), and at 1,000 at once each such system call cost the main thread a wait for the
        GIL (about 1.5 ms each, docs/performance.md)."""
        hook = self._hook(item, f"pytest_runtest_{when}")
        capture = Capture()
        token = capture.activate()
        try:
            call: CallInfo[None] = CallInfo.from_call(lambda: hook(item=item, **kwargs), when=when,
                                                      reraise=get_reraise_exceptions(item.config))
        finally:
            capture.deactivate(token)
        for key, text in capture.sections():
            item.add_report_section(when, key, text)
        ihook = item.ihook
        report: pytest.TestReport = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=report)
        if check_interactive_exception(call, report):
            ihook.pytest_exception_interact(node=item, call=call, report=report)
        return report

    def _collect(self, *, block: bool) -> None:
        """Report the call phases that finished (waiting for one when ``block``)."""
        while self.in_flight:
            try:
                done = self.finished.get(block=block, timeout=None)
            except queue.Empty:
                return
            block = False
            self.in_flight -= 1
            self._report(done)

    @contextmanager
    def _reporting(self, item: pytest.Item) -> Iterator[None]:
        """Inside an xdist worker, make ``item`` the one the worker reports about: xdist tags every
        report with the index of the item its loop last handed to the protocol hook."""
        worker = self._xdist_worker(item.config)
        if worker is None:
            yield
            return
        if self._index is None:
            self._index = {id(it): i for i, it in enumerate(item.session.items)}
        saved, worker.item_index = worker.item_index, self._index[id(item)]
        try:
            yield
        finally:
            worker.item_index = saved

    def _xdist_worker(self, config: pytest.Config) -> Any:
        if self._worker is False:
            self._worker = next((p for p in config.pluginmanager.get_plugins()
                                 if type(p).__name__ == "WorkerInteractor" and hasattr(p, "item_index")), None)
        return self._worker

    def _report(self, done: _Done) -> None:
        with self._reporting(done.item):
            self._report_call(done)

    def _report_call(self, done: _Done) -> None:
        item, call = done.item, done.call
        if isinstance(call, BaseException):  # what pytest lets through a test (pytest.exit, Ctrl-C)
            raise call
        ihook = item.ihook
        for key, text in done.capture.sections():
            item.add_report_section("call", key, text)
        report: pytest.TestReport = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=report)
        if check_interactive_exception(call, report):
            ihook.pytest_exception_interact(node=item, call=call, report=report)
        self._teardown(item)

    def _teardown(self, item: pytest.Item) -> None:
        session = item.session
        nextitem = None if session.shouldfail or session.shouldstop else self._upcoming
        self._setup_state(item).finishing = item
        try:
            self._phase(item, "teardown", nextitem=nextitem)
        finally:
            item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
            if hasattr(item, "_request"):
                item._request = False  # as pytest's runtestprotocol does: funcargs go away
                item.funcargs = None  # type: ignore[attr-defined]

    def _drain(self, session: pytest.Session) -> None:
        while self.in_flight:
            self._collect(block=True)

    def _interrupted(self, session: pytest.Session) -> None:
        """Ctrl-C / SIGTERM: stop what the agents started; report only what already finished."""
        from fabtest.agents.cli_agent import kill_all_groups

        kill_all_groups()
        while True:
            try:
                done = self.finished.get_nowait()
            except queue.Empty:
                break
            self.in_flight -= 1
            try:
                self._report(done)
            except Exception:  # one report's trouble must not lose the others
                continue
        self.in_flight = 0  # the rest are abandoned (daemon threads)

    @staticmethod
    def _setup_state(item: pytest.Item) -> ConcurrentSetupState:
        state = item.session._setupstate
        assert isinstance(state, ConcurrentSetupState), "another plugin replaced pytest's SetupState"
        return state

    # -- reporting -------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        if call.when == "call" and item.nodeid in self.alone:
            report.user_properties.append((ALONE_PROPERTY, self.alone[item.nodeid]))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == ALONE_PROPERTY:
                self.alone[report.nodeid] = str(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.alone:
            return
        terminalreporter.write_sep("-", f"fabtest: {len(self.alone)} scenario(s) ran alone, not concurrently")
        for nodeid, why in self.alone.items():
            terminalreporter.write_line(f"{nodeid}: {why}")


#: the garbage collector's thresholds while scenarios run concurrently (Python's default: 700, 10, 10)
GC_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Collect garbage less often while scenarios run concurrently. Every conversation in flight
    allocates, so at Python's default thresholds the collector ran about once per 6 LLM calls,
    each time walking the younger objects of every conversation in flight: at 2,500 at once in one
    process, 3,033 collections took 22.6 s of 106.8 s of CPU, 40 took 5.8 s at these thresholds
    (the run's CPU 79.1 s, its peak memory the same; docs/performance.md). A threshold the
    project set higher is kept."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(*(max(mine, theirs) for mine, theirs in zip(GC_THRESHOLDS, before, strict=False)))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _send_pending_judging(item: pytest.Item) -> None:
    """The judge calls the last turn left pending go out from the scenario's thread when its steps
    pass, as the scenario's end (``ScenarioState.finish``, on the main thread) would send them: at
    1,000 at once, handing them to the judge's thread pool was a tenth of the main thread's time.
    A failed or skipped call leaves them to that end, as before."""
    state = item.stash.get(STATE_KEY, None)
    if state is not None:
        state.flush_pending()


def _no_report_yet(item: pytest.Item) -> None:
    """Ctrl-C or SIGTERM during ``item``'s setup leaves it with no report, and pytest's ``tmp_path``
    finalizer, run at the session's end, then fails on the missing report (plain pytest does the
    same, in a window too short to matter; a scenario's setup is longer). An empty record lets it
    clean up as for a test that never ran."""
    item.stash.setdefault(tmppath_result_key, {})


def _marker_reason(marker: Any, by: str = "") -> str:
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
    return f"marked {SERIAL_MARKER}{by}" + (f" ({reason})" if reason else "")
