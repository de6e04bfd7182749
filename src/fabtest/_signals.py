"""SIGTERM ends a run the way Ctrl-C does: the finished scenarios are written, marked interrupted.

CI systems and ``timeout`` stop jobs with SIGTERM, whose default action kills the process at
once: the experiment file is never written and the scenario being recorded can be lost. Turning
the first SIGTERM into ``KeyboardInterrupt`` lets pytest (and ``fabtest run``) take the same path
as SIGINT; a second SIGTERM kills as before, so a stuck run can still be stopped.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["restore_sigterm", "sigterm_as_interrupt"]

_previous: Any = None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the next SIGTERM kills
    raise KeyboardInterrupt("SIGTERM")


def sigterm_as_interrupt() -> bool:
    """Install the handler (main thread, default handler only: a user's own handler wins)."""
    global _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    _previous = signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def restore_sigterm() -> None:
    """Put back the handler that was there before :func:`sigterm_as_interrupt`."""
    global _previous
    if _previous is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _previous)
    _previous = None
