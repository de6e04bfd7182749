"""One status line kept under pytest's own output on a terminal, without garbling it.

pytest writes its progress through one ``TerminalWriter``; this module puts a proxy between that
writer and its file. Before pytest's text goes out the status line is erased (and, when pytest was
in the middle of a line of dots, that partial line is written again so the cursor is back where
pytest left it); on pytest's next flush, and on every tick of the display, the status line is drawn
again below. Everything goes through one lock, so the display thread never writes in the middle of
pytest's text. Only plain ANSI sequences are used (clear line, cursor up): no curses, no alternate
screen, nothing left on the screen when the run ends.

A library such as rich does not help here: its live display owns the terminal and expects other
output to go through its console, while pytest keeps writing to the file it was given. What cannot
be kept apart is output that bypasses pytest's writer: with ``-s`` a test prints straight to the
terminal, so the caller does not use this there (it prints plain lines instead).
"""

from __future__ import annotations

import re
import shutil
import threading
from typing import Any, TextIO

__all__ = ["LiveLine", "visible_width"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ERASE = "\r\x1b[K"
_UP = "\x1b[1A"


def visible_width(text: str) -> int:
    """Columns ``text`` takes (ANSI colour codes take none)."""
    return len(_ANSI.sub("", text))


class LiveLine:
    """A file-like proxy: pytest's text passes through, a status line stays below it."""

    def __init__(self, file: TextIO, columns: Any = None) -> None:
        self._file = file
        self._columns = columns or (lambda: shutil.get_terminal_size().columns)
        self._lock = threading.RLock()
        self._pending = ""  # what pytest wrote after its last newline (the cursor is at its end)
        self._status = ""
        self._drawn = False  # the status line is on the screen now
        self._below = False  # ... on the line below pytest's partial line (else on that blank line)

    # -- the file protocol pytest's TerminalWriter uses -----------------------------------------
    def write(self, text: str) -> int:
        with self._lock:
            self._erase()
            written = self._file.write(text)
            tail = re.split(r"[\r\n]", text)[-1]
            self._pending = tail if ("\n" in text or "\r" in text) else self._pending + tail
            return written

    def flush(self) -> None:
        with self._lock:
            self._draw()
            self._file.flush()

    @property
    def file(self) -> TextIO:
        """The real file underneath."""
        return self._file

    def isatty(self) -> bool:
        return self._file.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, ...: the real file's
        return getattr(self._file, name)

    # -- the status line -------------------------------------------------------------------------
    def show(self, status: str) -> None:
        """Replace the status line (drawn at once)."""
        with self._lock:
            self._erase()
            self._status = status
            self._draw()
            self._file.flush()

    def print_line(self, text: str) -> None:
        """A whole line of its own (the plain mode for logs): pytest's partial line is ended first."""
        with self._lock:
            self._erase()
            self._file.write(("\n" if self._pending else "") + text + "\n")
            self._pending = ""
            self._file.flush()

    def clear(self) -> None:
        """Take the status line off the screen for good (the end of the run)."""
        with self._lock:
            self._erase()
            self._status = ""
            self._file.flush()

    def _draw(self) -> None:
        if self._drawn or not self._status:
            return
        columns = self._columns()
        if visible_width(self._pending) >= columns - 1:
            return  # pytest's partial line wrapped: no safe place to draw (the next line will do)
        self._below = bool(self._pending)
        self._file.write(("\n" if self._below else "") + self._status[: max(1, columns - 1)])
        self._drawn = True

    def _erase(self) -> None:
        if not self._drawn:
            return
        self._file.write(_ERASE + (_UP + "\r" + self._pending if self._below else ""))
        self._drawn = False
