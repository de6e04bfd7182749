"""Per-scenario captured output while scenarios run concurrently (docs/concurrency.md).

pytest captures one test at a time: its capture swaps ``sys.stdout`` per phase and its logging
plugin adds a handler per test to the root logger, so with several scenarios in flight every
scenario would see everyone's output. While scenarios run concurrently, each scenario's call
phase runs with a :class:`Capture` current in its :mod:`contextvars` context (inherited by the
agent's thread and its async tasks). Writes to ``sys.stdout``/``sys.stderr`` and log records
from that context go to the scenario's own buffers, which become the usual "Captured stdout
call", "Captured stderr call" and "Captured log call" report sections. A concurrent scenario's
setup and teardown, on the main thread, are caught the same way (their "Captured ... setup" and
"... teardown" sections), instead of by pytest's global capture, which stays suspended meanwhile;
everything else still goes where pytest sends it.

``print`` is routed by wrapping the streams pytest's global capture swaps in and out; output a
subprocess writes straight to file descriptor 1 or 2 cannot be told apart and lands wherever
pytest's capture sends it at that moment.
"""

from __future__ import annotations

import contextvars
import io
import logging
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["Capture", "OutputRouter"]

_CURRENT: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("fabtest_capture", default=None)


@dataclass
class Capture:
    """One scenario's output while its call phase runs."""

    out: io.StringIO = field(default_factory=io.StringIO)
    err: io.StringIO = field(default_factory=io.StringIO)
    log: list[str] = field(default_factory=list)

    def activate(self) -> contextvars.Token[Capture | None]:
        """Make this the capture of the calling context (the scenario's worker, or the main thread
        for a setup or teardown: then :meth:`deactivate` with the token this returns)."""
        return _CURRENT.set(self)

    @staticmethod
    def deactivate(token: contextvars.Token[Capture | None]) -> None:
        _CURRENT.reset(token)

    def sections(self) -> list[tuple[str, str]]:
        """``(key, text)`` of the sections pytest would have added for the call phase, for
        ``item.add_report_section("call", key, text)`` ("Captured stdout call", ...)."""
        found = [("log", "\n".join(self.log)), ("stdout", self.out.getvalue()), ("stderr", self.err.getvalue())]
        return [(key, text) for key, text in found if text]


class _Stream:
    """Stands in for one stream: a scenario's writes go to its Capture, all others to ``target``."""

    def __init__(self, target: Any, which: str) -> None:
        self._target = target
        self._which = which

    def write(self, text: str) -> int:
        capture = _CURRENT.get()
        if capture is None:
            return int(self._target.write(text) or 0)
        return int(getattr(capture, self._which).write(text) or 0)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _CURRENT.get() is None:
            self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class _LogRouter(logging.Handler):
    """A root handler that keeps a scenario's records with the scenario that logged them."""

    def emit(self, record: logging.LogRecord) -> None:
        capture = _CURRENT.get()
        if capture is not None:
            try:
                capture.log.append(self.format(record))
            except Exception:  # a bad log call must not fail the scenario
                self.handleError(record)


def _not_a_scenarios(record: logging.LogRecord) -> bool:
    return _CURRENT.get() is None


class OutputRouter:
    """Installs the routing for a concurrent window and takes it away again."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._patched: list[tuple[Any, str, Any]] = []
        self._handler: _LogRouter | None = None
        self._root_level: int | None = None
        self._filtered: list[logging.Handler] = []

    def start(self) -> None:
        for attr, which in (("out", "out"), ("err", "err")):
            for holder, name in self._stream_slots(attr):
                original = getattr(holder, name)
                self._patched.append((holder, name, original))
                setattr(holder, name, _Stream(original, which))
            current = getattr(sys, f"std{which}")
            if not isinstance(current, _Stream):
                self._patched.append((sys, f"std{which}", current))
                setattr(sys, f"std{which}", _Stream(current, which))
        plugin = self._config.pluginmanager.get_plugin("logging-plugin")
        handler = _LogRouter(level=getattr(plugin, "log_level", None) or logging.NOTSET)
        handler.setFormatter(getattr(plugin, "formatter", None) or logging.Formatter())
        root = logging.getLogger()
        level = getattr(plugin, "log_level", None)
        if level is not None and root.level > level:
            self._root_level, root.level = root.level, level
        root.addHandler(handler)
        self._handler = handler
        # pytest's per-test handlers capture whatever the main thread's setup or teardown of another
        # test logs meanwhile: a scenario's records are kept out of them
        self._filtered = [h for h in (getattr(plugin, n, None) for n in ("caplog_handler", "report_handler")) if h]
        for pytest_handler in self._filtered:
            pytest_handler.addFilter(_not_a_scenarios)

    def stop(self) -> None:
        for holder, name, original in reversed(self._patched):
            if holder is not sys:
                setattr(holder, name, original)
        for name in ("stdout", "stderr"):  # whatever pytest swapped in last, unwrapped
            current = getattr(sys, name)
            while isinstance(current, _Stream):
                current = current._target
            setattr(sys, name, current)
        self._patched.clear()
        root = logging.getLogger()
        if self._handler is not None:
            root.removeHandler(self._handler)
            self._handler = None
        for pytest_handler in self._filtered:
            pytest_handler.removeFilter(_not_a_scenarios)
        self._filtered = []
        if self._root_level is not None:
            root.setLevel(self._root_level)
            self._root_level = None

    def _stream_slots(self, attr: str) -> list[tuple[Any, str]]:
        """Where pytest's global capture keeps the stream it swaps into ``sys.std*`` and the one it
        restores (``tmpfile`` and ``_old`` of its SysCapture); [] when capture is off or unknown."""
        capman = self._config.pluginmanager.get_plugin("capturemanager")
        multi = getattr(capman, "_global_capturing", None)
        capture = getattr(multi, attr, None)
        sys_capture = getattr(capture, "syscapture", capture)
        slots: list[tuple[Any, str]] = []
        if sys_capture is not None and hasattr(sys_capture, "_old"):
            slots.append((sys_capture, "_old"))
            if sys_capture is not capture:  # under FDCapture, SysCapture's tmpfile is only written to
                slots.append((sys_capture, "tmpfile"))
        return slots
