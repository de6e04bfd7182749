"""An agent that closes ``sys.stdout`` or ``sys.stderr`` must not take the session with it.

Under pytest those names are the capture's files for the whole run: one ``sys.stdout.close()`` in
an agent made every later capture fail (``ValueError: I/O operation on closed file``) and ended
the run with an internal error. The streams in place when a scenario runs are given a ``close``
that does nothing (the agent's later prints are still captured); the session puts the real one
back at its end, so pytest closes its files as usual. See docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

__all__ = ["StreamGuard"]


def _keep_open() -> None:
    """``close()`` of a guarded stream: the stream belongs to the test runner, not to the agent."""


class StreamGuard:
    """Guards the current ``sys.stdout`` / ``sys.stderr`` objects (each once) until :meth:`release`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guarded: list[Any] = []

    def guard(self) -> None:
        with self._lock:
            for stream in (sys.stdout, sys.stderr):
                if stream is None or any(stream is s for s in self._guarded):
                    continue
                try:
                    stream.close = _keep_open  # type: ignore[method-assign]  # on this object only
                except (AttributeError, TypeError):  # a stream type without a __dict__: leave it alone
                    continue
                self._guarded.append(stream)

    def release(self) -> None:
        with self._lock:
            for stream in self._guarded:
                with contextlib.suppress(AttributeError):
                    del stream.close
            self._guarded.clear()
