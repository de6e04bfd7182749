"""The JSON records of a log file, read as a stream: JSON Lines line by line, a JSON array item by item.

Exports run to hundreds of megabytes, so nothing here holds more than one record (and a read
buffer) at a time: a ``.jsonl`` file is read one line at a time, and a file that is one JSON array
is cut into its items by :meth:`json.JSONDecoder.raw_decode` over a growing window. A file that is
one JSON object (an OTLP request, a single trace download) is parsed whole: its size is the limit
(docs/how-to/production.md, "Large files"); a ``{"data": [...]}`` API page yields its items.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fabtest.errors import UsageError

__all__ = ["Record", "records"]

_CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_PAGE_KEYS = {"data", "meta", "next_cursor"}


@dataclass(frozen=True)
class Record:
    """One JSON value and where it was read (``file:line`` for JSON Lines, ``file[item]`` in an array)."""

    value: Any
    where: str


def records(path: Path) -> Iterator[Record]:
    """Every record of ``path``; UsageError (one line, file and line) for what is not JSON."""
    try:
        handle = path.open("r", encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with handle:
        first = _first_char(handle)
        try:
            if first == "[":
                yield from _array_items(handle, path)
            elif first == "{":
                yield from _object_or_lines(handle, path)
            elif first:
                raise UsageError(f"{path}:1: not JSON (starts with {first!r}); expected JSON Lines, a JSON array "
                                 "or a JSON object")
        except RecursionError:
            raise UsageError(f"{path}: JSON nested too deeply to be a log") from None


def _first_char(handle: IO[str]) -> str:
    while True:
        char = handle.read(1)
        if not char or not char.isspace():
            handle.seek(0)
            _skip_bom(handle)
            return char


def _skip_bom(handle: IO[str]) -> None:
    start = handle.tell()
    if handle.read(1) != "\ufeff":
        handle.seek(start)


def _object_or_lines(handle: IO[str], path: Path) -> Iterator[Record]:
    """JSON Lines when the first line is a whole object on its own, else one object (parsed whole)."""
    first_line = handle.readline()
    try:
        value = json.loads(first_line)
    except ValueError:
        handle.seek(0)
        try:
            whole = json.load(handle)
        except ValueError as exc:
            raise UsageError(f"{path}: not JSON ({exc})") from None
        yield from _unwrapped(whole, str(path))
        return
    yield from _unwrapped(value, f"{path}:1")
    for number, line in enumerate(handle, start=2):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a JSON line ({exc.msg}); every line of a JSON Lines "
                             "file is one JSON object") from None
        yield from _unwrapped(value, f"{path}:{number}")


def _unwrapped(value: Any, where: str) -> Iterator[Record]:
    """An API page (``{"data": [...]}`` from Langfuse or Phoenix) is its items; anything else itself."""
    if isinstance(value, dict) and isinstance(value.get("data"), list) and set(value) <= _PAGE_KEYS:
        for index, item in enumerate(value["data"]):
            yield Record(item, f"{where}[{index}]")
    else:
        yield Record(value, where)


def _array_items(handle: IO[str], path: Path) -> Iterator[Record]:
    """The items of a top-level JSON array, one at a time, with a read window that grows only to
    the size of the largest item."""
    buffer = handle.read(_CHUNK).lstrip()[1:]  # past "["
    index, done = 0, False
    while True:
        buffer = buffer.lstrip().lstrip(",").lstrip()
        while not buffer and not done:
            more = handle.read(_CHUNK)
            done = not more
            buffer = more.lstrip().lstrip(",").lstrip()
        if buffer.startswith("]") or (done and not buffer):
            return
        try:
            value, end = _DECODER.raw_decode(buffer)
        except json.JSONDecodeError as exc:
            more = handle.read(max(_CHUNK, len(buffer)))  # double the window: linear time overall
            if not more:
                raise UsageError(f"{path}: item {index} of the JSON array is not JSON ({exc.msg})") from None
            buffer += more
            continue
        yield Record(value, f"{path}[{index}]")
        index += 1
        buffer = buffer[end:]
