"""SIGTERM ends a run the way Ctrl-C does: the finished scenarios are written, marked interrupted.

CI systems and ``timeout`` stop jobs with SIGTERM, whose default action kills the process at
once: the experiment file is never written and the scenario being recorded can be lost. Turning
the first SIGTERM into ``KeyboardInterrupt`` lets pytest (and ``fabtest run``) take the same path
as SIGINT; a second SIGTERM before that one is handled kills as before, so a stuck run can still
be stopped. Installs nest (``fabtest run`` inside a pytest session) and a user's own handler wins.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["restore_sigterm", "sigterm_as_interrupt"]

_previous: Any = None
_depth = 0
_received = 0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _received
    _received += 1
    if _received > 1:  # the first one is still being handled: die the default way
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt("SIGTERM")


def sigterm_as_interrupt() -> bool:
    """Install the handler (main thread; not over a user's own handler). True when in force."""
    global _previous, _depth, _received
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        _depth += 1
        return True
    if current is not signal.SIG_DFL:
        return False
    _previous, _depth, _received = current, 1, 0
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def restore_sigterm(installed: bool = True) -> None:
    """Undo one :func:`sigterm_as_interrupt` that returned True; the last one puts back the default."""
    global _previous, _depth, _received
    if not installed or _depth == 0 or threading.current_thread() is not threading.main_thread():
        return
    _depth -= 1
    _received = 0  # the interrupt was handled
    if _depth == 0:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)
        _previous = None
