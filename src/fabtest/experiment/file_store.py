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

from fabtest._internal.files import write_bytes_atomic
from fabtest.conversation import Attachment, Conversation

__all__ = ["FILES_DIR", "conversation_files", "file_path", "keep", "load"]

#: the folder of the results directory that holds the files' bytes
FILES_DIR = "files"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def file_path(results_dir: Path, sha256: str) -> Path:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256: {sha256!r}")
    return results_dir / FILES_DIR / sha256


def conversation_files(conversation: Conversation) -> list[Attachment]:
    """Every file of the conversation, the seeded history's included, once per content."""
    return conversation.attachments


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
