"""Files a scenario sends: the step forms that name them, and loading each file once per run.

``When the user sends "files/lamp.png" with "Is this covered?"`` names files relative to the
feature file's folder (a playbook's, for a playbook). Every such file is checked when the feature
is collected, before anything runs: a missing, unreadable or oversized file, or one whose type its
name does not tell, is one line naming the file and the step (never a traceback, never a partial
run). The :class:`FileLoader` the run shares reads and hashes each file once: every iteration,
turn and judge call then holds the same immutable :class:`~fabtest.conversation.Attachment`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabtest.conversation import OCTET_STREAM, Attachment, guess_mime_type, human_size
from fabtest.errors import UsageError

__all__ = ["FILES_TABLE_STEP", "FILE_STEP", "HAS_FILES_STEP", "FileLoader", "FileRef", "files_in_step",
           "parse_file_list", "table_files"]

_QUOTED = r'"[^"]*"'
#: ``the user sends "a.pdf" and "b.png" with "..."`` (also ``"a", "b" and "c"``)
FILE_STEP = re.compile(r'the user sends (?P<files>' + _QUOTED + r'(?:(?:,| and|, and) ' + _QUOTED + r')*) with '
                       r'"(?P<text>.*)"')
#: ``the user sends these files with "...":`` and a ``| file |`` table (optional ``| type |`` column)
FILES_TABLE_STEP = re.compile(r'the user sends these files with "(?P<text>.*)":')
#: ``Given the user has the files "receipt.jpg", "invoice.pdf"``: the simulated user may send them
HAS_FILES_STEP = re.compile(r'the user has the files? (?P<files>' + _QUOTED + r'(?:(?:,| and|, and) '
                            + _QUOTED + r')*)')


@dataclass(frozen=True)
class FileRef:
    """A file as a step names it: the path as written, and its type when the step gives one."""

    path: str
    mime_type: str | None = None


def parse_file_list(text: str) -> list[str]:
    """``"a.pdf" and "b.png"`` -> ``["a.pdf", "b.png"]``."""
    return re.findall(r'"([^"]*)"', text)


def table_files(rows: Sequence[Sequence[str]], *, where: str) -> list[FileRef]:
    """The ``| file |`` table (with an optional ``| type |`` column) of the data-table form."""
    if not rows:
        raise UsageError(f"{where}: the user sends these files needs a table with a | file | column")
    header = [c.strip().lower() for c in rows[0]]
    if "file" not in header:
        raise UsageError(f"{where}: the files table needs the header | file | (and optionally | type |), "
                         f"got | {' | '.join(rows[0])} |")
    at, type_at = header.index("file"), header.index("type") if "type" in header else None
    refs = [FileRef(row[at].strip(), (row[type_at].strip() or None) if type_at is not None else None)
            for row in rows[1:]]
    if not refs:
        raise UsageError(f"{where}: the files table lists no file")
    return refs


def files_in_step(text: str, rows: Sequence[Sequence[str]] | None, *, where: str) -> list[FileRef] | None:
    """The files a step's text (and table) names, or None for a step that sends none."""
    text = text.strip()
    if m := FILE_STEP.fullmatch(text):
        return [FileRef(p) for p in parse_file_list(m.group("files"))]
    if FILES_TABLE_STEP.fullmatch(text):
        return table_files(rows or [], where=where)
    if m := HAS_FILES_STEP.fullmatch(text):
        return [FileRef(p) for p in parse_file_list(m.group("files"))]
    return None


@dataclass
class FileLoader:
    """Reads each named file once per run: the same path (unchanged on disk) gives the same object.

    Shared by a run's scenarios (the pytest session, ``fabtest run``); a fresh one per
    ``fabtest.run`` call. ``reads`` counts the files actually read, for tests and benchmarks.
    """

    max_bytes: int = 20_000_000
    reads: int = 0
    _cache: dict[tuple[str, str | None], tuple[tuple[int, int], Attachment]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, base: Path, ref: FileRef, *, where: str) -> tuple[Path, os.stat_result, str]:
        """What :meth:`load` checks before it reads: the file exists, fits the cap, has a type."""
        path = (base / ref.path) if not os.path.isabs(ref.path) else Path(ref.path)
        shown = f'"{ref.path}"'
        if not ref.path.strip():
            raise UsageError(f"{where}: an empty file name")
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise UsageError(f"{where}: the file {shown} does not exist (paths are relative to {base})") from None
        except OSError as exc:
            raise UsageError(f"{where}: cannot read the file {shown}: {exc.strerror or exc}") from None
        if not path.is_file():
            raise UsageError(f"{where}: {shown} is not a file")
        if stat.st_size > self.max_bytes:
            raise UsageError(f"{where}: the file {shown} is {human_size(stat.st_size)}, over the limit of "
                             f"{human_size(self.max_bytes)} ([tool.fabtest] max_file_bytes)")
        mime_type = ref.mime_type or guess_mime_type(path.name)
        if mime_type == OCTET_STREAM and not ref.mime_type:
            raise UsageError(f"{where}: cannot tell the type of the file {shown} from its name: give it a known "
                             "extension (.png, .pdf, .txt, ...) or use the table form with a | type | column")
        if "/" not in mime_type:
            raise UsageError(f'{where}: the type "{mime_type}" of {shown} is not a MIME type like "image/png"')
        return path, stat, mime_type

    def load(self, base: Path, ref: FileRef, *, where: str) -> Attachment:
        """The file ``ref`` names under ``base``; a problem is a UsageError naming the file and ``where``."""
        path, stat, mime_type = self.check(base, ref, where=where)
        shown = f'"{ref.path}"'
        key, version = (str(path.resolve()), ref.mime_type), (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
            try:
                file = Attachment.from_path(path, mime_type=mime_type)
            except OSError as exc:
                raise UsageError(f"{where}: cannot read the file {shown}: {exc.strerror or exc}") from None
            self.reads += 1
            self._cache[key] = (version, file)
            return file

    def load_all(self, base: Path, refs: Iterable[FileRef], *, where: str) -> tuple[Attachment, ...]:
        return tuple(self.load(base, ref, where=where) for ref in refs)
