"""Checks on the files an agent replies with: is there one (an image, one matching ``*.pdf``), and
what text it holds, for ``contain`` / ``match`` checks.

A file's text is its bytes decoded for ``text/*`` and JSON-like types, and the text of its pages
for a PDF, through ``pypdf`` (the ``pdf`` extra: a pure-Python, maintained reader under the BSD
licence, so no system library is needed). Text extraction is memoised per content hash, so a
file checked by several steps is parsed once.
"""

from __future__ import annotations

import fnmatch
import functools
import io
from collections.abc import Sequence

from fabtest._internal.extras import require_extra
from fabtest.conversation import Attachment

__all__ = ["check_reply_files", "file_text", "matching_files"]

_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml", "application/csv")


def matching_files(files: Sequence[Attachment], *, image: bool = False, pattern: str | None = None) -> list[Attachment]:
    """The files that are images (``image``) and whose name matches the glob ``pattern`` (any case)."""
    return [f for f in files if (not image or f.is_image)
            and (pattern is None or fnmatch.fnmatch(f.name.lower(), pattern.lower()))]


def check_reply_files(files: Sequence[Attachment], *, image: bool = False,
                      pattern: str | None = None) -> tuple[bool, str]:
    """Did the reply carry such a file; the details name what it carried."""
    wanted = ("an image" if image else "a file") + (f' matching "{pattern}"' if pattern else "")
    found = matching_files(files, image=image, pattern=pattern)
    carried = ", ".join(f.describe() for f in files) or "no file"
    if found:
        return True, f"the reply has {wanted}: {', '.join(f.name for f in found)}"
    return False, f"the reply has no {wanted.split(' ', 1)[1]}; it carried {carried}"


def file_text(file: Attachment) -> str | None:
    """The text a file holds (None for a type without text, such as an image); a PDF without the
    ``pdf`` extra installed is a UsageError naming it."""
    if file.mime_type == "application/pdf":
        require_extra("pdf", where=f"the file {file.name}")
    return _text(file.sha256, file.mime_type, file.data)


@functools.lru_cache(maxsize=64)
def _text(sha256: str, mime_type: str, data: bytes) -> str | None:
    del sha256  # part of the key only: equal bytes hash alike, and hashing the key is then cheap
    if mime_type.startswith("text/") or mime_type in _TEXT_TYPES or mime_type.endswith("+json"):
        return data.decode("utf-8", errors="replace")
    if mime_type == "application/pdf":
        import pypdf

        reader = pypdf.PdfReader(io.BytesIO(data))
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    return None
