"""The progress display of a run, fed by pytest's report hooks (docs "Performance": progress).

Only hooks that also reach pytest-xdist's controller are used: ``pytest_runtest_logstart`` (a test
is in flight), ``pytest_runtest_logreport`` (a phase failed; the scenario's result with its usage),
``pytest_runtest_logfinish`` (done). So the display lives in the one process that talks to the
terminal, sequential or ``-n``, and nothing is sent between processes for it. LLM calls in flight
come from the LLM limiter: this process's own count, or under ``-n`` the run's shared slot files
(:func:`fabtest.llm.shared_limit.busy_slots`).

Modes (``--fabtest-progress``): ``live`` keeps one status line under pytest's output
(:mod:`fabtest.pytest_plugin.live_line`), refreshed twice a second; ``lines`` prints a plain line
every ``--fabtest-progress-every`` seconds (CI logs; nothing at all in a run shorter than that);
``auto`` is ``live`` on a terminal and ``lines`` elsewhere, and ``lines`` on a terminal with ``-s``
(a test's own prints would land on the status line); ``off`` is nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from fabtest.config.settings import Settings
from fabtest.experiment.cost import price_table
from fabtest.experiment.progress import Progress, render
from fabtest.pytest_plugin.late_verdicts import LATE_PROPERTY
from fabtest.pytest_plugin.live_line import LiveLine
from fabtest.pytest_plugin.results import RESULT_PROPERTY

__all__ = ["MODES", "ProgressDisplay", "choose_mode", "register"]

MODES = ("auto", "live", "lines", "off")
#: seconds between two refreshes of the live line
LIVE_REFRESH_S = 0.5


def choose_mode(asked: str, *, tty: bool, capture: str, term: str | None) -> str:
    """``live``, ``lines`` or ``off`` for what was asked and where the output goes."""
    if asked != "auto":
        return asked
    if not tty or term == "dumb":
        return "lines"
    return "live" if capture in ("fd", "sys") else "lines"


def register(config: pytest.Config, settings: Settings, llm_in_flight: Callable[[], int | None]) -> None:
    """Show progress in this process when it is the one that reports (not an xdist worker); the
    display attaches to pytest's terminal at session start (it does not exist before)."""
    if hasattr(config, "workerinput") or config.getoption("collectonly", False):
        return
    if (config.getoption("--fabtest-progress") or "auto") == "off":
        return
    prices = price_table({m: p.model_dump() for m, p in settings.prices.items()})
    model = Progress(started_at=time.monotonic(), prices=prices,
                     role_models={"judge": settings.judge.model, "simulator": settings.simulator.model})
    config.pluginmanager.register(ProgressDisplay(model, llm_in_flight), "fabtest-progress")


def _own_copy(file: Any) -> Any:
    """A file of our own on the same terminal (a duplicate of its descriptor), else ``file``.

    While a test runs, pytest's capture points descriptor 1 at a temporary file; the display thread
    writes at any moment, so through the original descriptor its line (and pytest's text it passes
    on) would land in the scenario's captured output instead of on the screen.
    """
    try:
        fd = file.fileno()
    except (AttributeError, OSError, ValueError):
        return file  # no descriptor (an in-process pytester run): nothing captures it under us
    file.flush()
    return os.fdopen(os.dup(fd), "w", encoding=getattr(file, "encoding", None) or "utf-8",
                     errors=getattr(file, "errors", None) or "strict")


class ProgressDisplay:
    """The hooks that feed :class:`~fabtest.experiment.progress.Progress`, and the thread that shows it."""

    def __init__(self, model: Progress, llm_in_flight: Callable[[], int | None]) -> None:
        self.model = model
        self._llm_in_flight = llm_in_flight
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tw: Any = None
        self._line: LiveLine | None = None
        self._live = False
        self._interval = LIVE_REFRESH_S
        self._printed = False  # lines mode: a line went out (then the run's last one goes out too)
        self._original: Any = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Put the status line between pytest's terminal writer and its file."""
        config = session.config
        tw: Any = config.get_terminal_writer() if config.pluginmanager.has_plugin("terminalreporter") else None
        file = getattr(tw, "_file", None)  # pytest's TerminalWriter keeps its file here (no public accessor)
        if file is None:
            return
        isatty = getattr(file, "isatty", None)
        mode = choose_mode(config.getoption("--fabtest-progress") or "auto", tty=bool(isatty and isatty()),
                           capture=str(config.getoption("capture", "fd")), term=os.environ.get("TERM"))
        if mode == "off":
            return
        every = config.getoption("--fabtest-progress-every")
        self._live = mode == "live"
        self._interval = max(0.05, LIVE_REFRESH_S if self._live else float(every if every is not None else 30.0))
        self._tw, self._original = tw, file
        self._line = LiveLine(_own_copy(file))
        tw._file = self._line

    # -- pytest hooks ------------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not session.config.pluginmanager.has_plugin("dsession"):
            self.model.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.model.total is None:
            self.model.total = len(ids)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self._lock:
            self.model.start(nodeid, time.monotonic())
        if self._thread is None and self._line is not None:
            self._thread = threading.Thread(target=self._run, name="fabtest-progress", daemon=True)
            self._thread.start()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        with self._lock:
            if report.failed:
                self.model.failed_phase(report.nodeid)
            for name, value in report.user_properties:
                if name == RESULT_PROPERTY and isinstance(value, dict):
                    self.model.add_result(value)
                elif name == LATE_PROPERTY and isinstance(value, list):
                    for verdict in value:
                        self.model.add_late(verdict)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker's last soft verdicts come with its output (see late.py)."""
        late = getattr(node, "workeroutput", {}).get(LATE_PROPERTY)
        with self._lock:
            for verdict in late if isinstance(late, list) else []:
                self.model.add_late(verdict)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        with self._lock:
            self.model.finish(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Before pytest's summary: the status line leaves the screen (lines mode: a last line)."""
        self.stop()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.stop()

    # -- the display ---------------------------------------------------------------------------------
    def status(self) -> str:
        """The line as of now."""
        try:
            in_flight = self._llm_in_flight()
        except Exception:  # a display never fails a run
            in_flight = None
        with self._lock:
            return render(self.model.snapshot(time.monotonic(), in_flight))

    def _run(self) -> None:
        assert self._line is not None
        while not self._stop.wait(self._interval):
            if self._live:
                self._line.show(self.status())
            else:
                self._line.print_line(self.status())
                self._printed = True

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._line is None:
            return
        if self._live:
            self._line.clear()
        elif self._printed:
            self._line.print_line(self.status())
        self._tw._file = self._original
        if self._line.file is not self._original:
            self._line.file.close()
