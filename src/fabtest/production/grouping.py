"""Events grouped by conversation on disk, so a log of any size is read with flat memory.

The spans of one conversation are scattered over an export (each OTLP batch holds spans of many
traces; a Langfuse session's traces are separate records). Holding them in memory until the end
would grow with the file, so each event is written to a temporary SQLite file as it is read, and
read back one conversation at a time, in time order. A span without a conversation id is filed
under its trace (``trace:<id>``) and joins the conversation another span of that trace names.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from fabtest.production.events import Event

__all__ = ["Grouper"]

_BATCH = 2000


class Grouper:
    """Collects events (:meth:`add`), then yields them per conversation (:meth:`conversations`)."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="fabtest-logs-")
        self._db = sqlite3.connect(Path(self._dir.name) / "events.sqlite")
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-8000;"
                               "CREATE TABLE events (conv TEXT, seq INTEGER, t0 REAL, body TEXT);"
                               "CREATE TABLE aliases (key TEXT PRIMARY KEY, conv TEXT);")
        self._rows: list[tuple[str, int, float, str]] = []
        self._seq = 0
        #: the format of the records being read (stamped on each event as ``fmt``)
        self.format = ""

    def add(self, ev: Event) -> None:
        self._seq += 1
        ev.setdefault("fmt", self.format)
        self._rows.append((ev["c"], self._seq, ev["t0"], json.dumps(ev, ensure_ascii=False, default=str)))
        if len(self._rows) >= _BATCH:
            self._flush()

    def alias(self, key: str, conversation: str) -> None:
        """Events filed under ``key`` (a trace) belong to ``conversation`` (the first one named wins)."""
        self._db.execute("INSERT OR IGNORE INTO aliases VALUES (?, ?)", (key, conversation))

    def _flush(self) -> None:
        self._db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", self._rows)
        self._rows.clear()

    def conversations(self) -> Iterator[tuple[str, list[Event]]]:
        """``(conversation id, its events by time)`` for every conversation, one at a time."""
        self._flush()
        self._db.execute("CREATE INDEX IF NOT EXISTS by_conv ON events (conv, t0, seq)")
        rows = self._db.execute(
            "SELECT COALESCE(a.conv, e.conv) AS c, e.body FROM events e LEFT JOIN aliases a ON a.key = e.conv "
            "ORDER BY c, e.t0, e.seq")
        current: str | None = None
        batch: list[Event] = []
        for conv, body in rows:
            if conv != current and batch:
                yield str(current), batch
                batch = []
            current = conv
            batch.append(json.loads(body))
        if batch:
            yield str(current), batch

    def close(self) -> None:
        self._db.close()
        self._dir.cleanup()

    def __enter__(self) -> Grouper:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
