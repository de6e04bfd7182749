"""The bytes of the conversation's files, kept once per content under the results directory.

The experiment JSON lists each turn's files by name, type, size and sha256 and never holds the
bytes (a 5 MB photo in every run of every scenario would make the file unreadable); the bytes are
written once to ``results/files/<sha256>``, whoever sent them and however many runs did. The name
is the content's hash, so a file is never written twice and never overwritten with other bytes,
and xdist workers writing the same file at once each replace it with identical bytes.
``fabtest view`` and Markdown reports link to them; replay and rejudge read them back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fabtest._internal.files import write_bytes_atomic
from fabtest._internal.wav import voice_files
from fabtest.conversation import Attachment, Conversation
from fabtest.errors import UsageError

__all__ = ["FILES_DIR", "conversation_files", "file_path", "keep", "load", "recorded"]

#: the folder of the results directory that holds the files' bytes
FILES_DIR = "files"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def file_path(results_dir: Path, sha256: str) -> Path:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256: {sha256!r}")
    return results_dir / FILES_DIR / sha256


def conversation_files(conversation: Conversation) -> list[Attachment]:
    """Every file of the conversation, the seeded history's included, and the audio of its voice
    turns as WAV files, once per content."""
    spoken = [f for turn in conversation.turns for f in voice_files(turn)]
    if not spoken:
        return conversation.attachments
    unique: dict[str, Attachment] = {}
    for file in [*conversation.attachments, *spoken]:
        unique.setdefault(file.sha256, file)
    return list(unique.values())


def keep(results_dir: Path, files: Iterable[Attachment]) -> int:
    """Write each file's bytes unless its content is already kept; returns how many were written."""
    written = 0
    for file in files:
        path = file_path(results_dir, file.sha256)
        if not path.exists():
            write_bytes_atomic(path, file.data)
            written += 1
    return written


def load(results_dir: Path, *, name: str, mime_type: str, sha256: str) -> Attachment | None:
    """A recorded file read back from its kept bytes (None when they are not there)."""
    try:
        data = file_path(results_dir, sha256).read_bytes()
    except (OSError, ValueError):
        return None
    return Attachment(name=name, mime_type=mime_type, data=data, sha256=sha256)


def recorded(results_dir: Path, records: Iterable[Any], *, where: str) -> tuple[Attachment, ...]:
    """A turn's recorded files (``FileRecord``\\ s) with their kept bytes; a file whose bytes are not
    there is a UsageError naming it (a replay without it would be another conversation)."""
    files = []
    for record in records:
        file = load(results_dir, name=record.name, mime_type=record.mime_type, sha256=record.sha256)
        if file is None:
            raise UsageError(f"{where}: the bytes of the file {record.name!r} (sha256 {record.sha256[:12]}...) are not "
                             f"under {results_dir / FILES_DIR}: copy that folder along with the experiment")
        files.append(file)
    return tuple(files)
