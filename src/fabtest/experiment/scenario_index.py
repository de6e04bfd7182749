"""The ``scenario_index`` of an experiment file: one compact row per scenario, and the lean reader.

``write_document`` writes a row per scenario (:func:`index_row`) before the full entries, so a
comparison or a listing reads the rows and stops before the transcripts (:func:`read_lean`),
checking each batch of rows without the models. Reading and writing the whole file is
``export.py``'s; this module is the index's two ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from fabtest.experiment import stats

__all__ = ["INDEX_FIELDS", "RowSink", "entry_topics", "index_row", "lean_entry", "read_lean"]

INDEX_FIELDS = ("id", "name", "iteration", "passed", "skipped", "turns", "failure_type", "eval_passed", "eval_total",
                 "topics", "criteria", "checks", "cost_usd", "cost_complete")


def entry_topics(entry: dict[str, Any]) -> int | None:
    """Distinct topics a scenario visited, or None when it had no topic graph (not counted as 0)."""
    if "topics_count" in entry:  # a lean entry
        return cast(int | None, entry["topics_count"])
    visited = entry.get("topics_visited") or []
    if entry.get("topics") or entry.get("topic_path") or visited:
        return len(visited)
    return None


def index_row(entry: dict[str, Any]) -> list[Any]:
    """One scenario's compact ``scenario_index`` row, so comparisons and listings need not parse transcripts."""
    ev, spent = entry.get("evaluations"), entry.get("cost")
    ev = ev if isinstance(ev, dict) else {}
    spent = spent if isinstance(spent, dict) else {}
    criteria, checks = stats.entry_check_counts(entry)
    return [entry.get("id"), entry.get("name"), entry.get("iteration", 1), entry.get("passed"),
            entry.get("skipped", False),
            entry.get("turns", 0), entry.get("failure_type"), ev.get("passed", 0), ev.get("total", 0),
            entry_topics(entry), criteria, checks, spent.get("usd"), spent.get("complete", True)]


#: what a streaming reader hands each batch of checked ``scenario_index`` rows to (see ``read_index``)
RowSink = Callable[[list[list[Any]]], None]


def read_lean(path: Path, sink: RowSink) -> dict[str, Any] | None:
    """Header keys of a file in ``write_document``'s layout, its index rows handed to ``sink`` in
    batches as they are parsed, else None (``sink`` may have had some rows by then: discard them).

    Stops reading at ``scenario_results``, so transcripts are never parsed, and never holds more
    than a batch of parsed rows: comparing two 100,000-scenario experiments stays within seconds
    and a few hundred MB.
    """
    doc: dict[str, Any] = {}
    indexed = False
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.readline().strip() != "{":
                return None
            for line in handle:
                if line.startswith('"scenario_results": ['):
                    break
                if line.startswith(_INDEX_START):
                    if not _index_rows(line, sink):
                        return None
                    indexed = True
                    continue
                try:
                    doc.update(json.loads("{" + line.rstrip().rstrip(",") + "}"))
                except (ValueError, RecursionError):
                    return None
            else:
                return None
    except (OSError, UnicodeDecodeError):
        return None
    if not indexed:
        return None
    doc["scenario_results"] = []
    doc["lean"] = True
    return doc


_INDEX_START = f'"scenario_index": {{"fields": {json.dumps(list(INDEX_FIELDS))}, "rows": ['
_INDEX_END = "]},"
_BATCH = 1 << 18  # characters of index rows parsed at once (about a thousand rows)
_ROW_CUT = '], ["'  # between two rows: one ends with its cost_complete, the next starts with its id


def _index_rows(line: str, sink: RowSink) -> bool:
    """Hands the rows of the ``scenario_index`` line to ``sink``, checked, a batch at a time; False
    when the line is not what ``write_document`` writes (some rows may have been handed already).

    A batch is cut before a ``], ["``; inside a JSON string a ``"`` is escaped, so such a cut can
    only fall in a string where that string ends, and then the batch does not parse: it is
    extended to the next cut. A batch that parses therefore ends between two rows.
    """
    body_end = len(line.rstrip())
    if not line.startswith(_INDEX_END, body_end - len(_INDEX_END)):
        return False
    body_end -= len(_INDEX_END)
    rows = _Rows()
    loads = json.loads
    pos = len(_INDEX_START)
    while pos < body_end:
        cut = line.find(_ROW_CUT, pos + _BATCH, body_end)
        while True:
            stop = body_end if cut < 0 else cut + 1
            try:
                batch = loads("[" + line[pos:stop] + "]")
                break
            except (ValueError, RecursionError):
                if cut < 0:
                    return False
                cut = line.find(_ROW_CUT, cut + 1, body_end)
        if not rows.check(batch):
            return False  # not what write_document writes: the full parse and validation say what is wrong
        sink(batch)
        pos = stop + 2  # past the ", " between rows
    return True


def lean_entry(row: list[Any]) -> dict[str, Any]:
    """One checked index row as a lean ``scenario_results`` entry (``read_document(lean=True)``)."""
    (sid, name, iteration, passed, skipped, turns, failure_type, ev_passed, ev_total, topics, criteria,
     checks, cost_usd, cost_complete) = row
    return {"id": sid, "name": name, "iteration": iteration, "passed": passed, "skipped": skipped,
            "turns": turns, "failure_type": failure_type, "evaluations": {"passed": ev_passed, "total": ev_total},
            "topics_count": topics, "criteria_counts": criteria, "checks_counts": checks,
            "cost_usd": cost_usd, "cost_complete": cost_complete}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_NONE = type(None)
#: the type of each ``scenario_index`` row field as ``index_row`` writes it
_ROW_TYPES: tuple[tuple[type, ...], ...] = (
    (str,), (str,), (int,), (bool,), (bool,), (int,), (str, _NONE), (int,), (int,), (int, _NONE), (dict,), (dict,),
    (float, int, _NONE), (bool,))


class _Rows:
    """Checks index rows without the models (validating 100,000 lean entries with pydantic took
    longer than the whole comparison) and makes equal ``{label: [passed, evaluated]}`` maps, which
    most scenarios have, one shared object (read-only: comparisons add them up into their own)."""

    def __init__(self) -> None:
        self._shapes: set[tuple[type, ...]] = set()
        self._counts: dict[str, dict[str, list[int]]] = {}

    def check(self, batch: Any) -> bool:
        """True when every row of ``batch`` is a row ``index_row`` writes; their count maps are
        replaced by the shared equal ones."""
        if not isinstance(batch, list):
            return False
        shapes, width, counts = self._shapes, len(_ROW_TYPES), self._counts
        for row in batch:
            if type(row) is not list or len(row) != width:
                return False
            shape = tuple(map(type, row))  # exact types: a bool is no int here
            if shape not in shapes:
                if not all(t in allowed for t, allowed in zip(shape, _ROW_TYPES, strict=True)):
                    return False
                shapes.add(shape)
            if row[2] < 1:
                return False
            for i in (10, 11):
                # repr tells JSON values apart exactly (1 from true from 1.0), unlike ==
                shared = counts.get(key := repr(row[i]))
                if shared is None:
                    if not all(type(pair) is list and len(pair) == 2 and _is_int(pair[0]) and _is_int(pair[1])
                               for pair in row[i].values()):
                        return False
                    shared = counts[key] = row[i]
                row[i] = shared
        return True
