"""What a log format is to fabtest: a name, a probe and a reader (the formats are listed in
:mod:`fabtest.production.logs`).

A :class:`Format` says whether a record is its own (``probe``: None, or why not) and turns a record
into events (:mod:`fabtest.production.events`) in a :class:`~fabtest.production.grouping.Grouper`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabtest.production.grouping import Grouper
from fabtest.production.records import Record

__all__ = ["Format"]


@dataclass(frozen=True)
class Format:
    name: str
    #: what the format is, for messages and the feature an import writes
    label: str
    probe: Callable[[Any], str | None]
    read: Callable[[Record, Grouper], None]
