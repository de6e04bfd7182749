"""Atomic file writes: readers (and a crash) never see half a file, and a crash leaves no litter.

A file that several processes read, change and write back (a labels file two ``fabtest view``
servers add to) is changed under :func:`locked`, a lock held across the read and the write:
an atomic write alone keeps the file whole but lets the second writer drop the first one's change.

The temp file is locked while it is written. A process killed mid-write (SIGKILL, OOM) leaves
its temp file behind, unlocked: :func:`remove_stale_temp_files` deletes exactly those, never one
that a live run (another pytest in the same project) is still writing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

__all__ = ["TEXT_ERRORS", "atomic_writer", "locked", "path_inside", "remove_stale_temp_files", "write_bytes_atomic",
           "write_text_atomic"]

_TMP_SUFFIX = ".tmp"
#: How fabtest encodes text into its files: a lone surrogate (UTF-8 cannot hold one; agents are
#: cleaned at their boundary, this is the net under everything else) is written as its ``\\udXXX``
#: escape, which inside a JSON string reads back as the same character: a file write never crashes.
TEXT_ERRORS = "backslashreplace"


@contextlib.contextmanager
def atomic_writer(path: Path, *, exclusive: bool = False) -> Iterator[TextIO]:
    """Write to a temp file beside ``path``; on success fsync it and ``os.replace`` it into place.

    ``exclusive``: never replace a file that is there when the write ends (one a person or another
    process made while a long command ran): the finished temp file is hard-linked to ``path``, which
    fails with ``FileExistsError`` if the name is taken, and the temp file goes either way.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:24]}.", suffix=_TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=TEXT_ERRORS) as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # "being written": see remove_stale_temp_files
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
            if exclusive:
                os.link(tmp, path)  # atomic, and refuses a name that exists
                os.unlink(tmp)
            else:
                os.replace(tmp, path)  # still locked: the name never points at an unlocked half file
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str, *, exclusive: bool = False) -> Path:
    """``path.write_text(text)`` that never leaves half a file (a full disk, a kill): all or nothing.

    ``exclusive``: raise ``FileExistsError`` rather than replace a file at ``path`` (see :func:`atomic_writer`).
    """
    target = Path(path)
    with atomic_writer(target, exclusive=exclusive) as handle:
        handle.write(text)
    return target


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock for changing ``path`` (every process and thread): read, change and write it inside.

    The lock is on ``path``'s folder, not on the file, which an atomic write replaces by another file
    (a lock on the old one would guard nothing), and not on a lock file beside it, which would be
    litter in the results folder. Changes to files of one folder wait for each other: they are short."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # per open file: threads of one process exclude each other too
        yield
    finally:
        os.close(fd)  # releases the lock


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """``path.write_bytes(data)``, all or nothing: a temp file beside it, fsynced, then renamed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:24]}.", suffix=_TMP_SUFFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def remove_stale_temp_files(directory: str | os.PathLike[str], min_age_s: float = 60.0) -> list[Path]:
    """Delete ``.*.tmp`` files that no live process is writing (left by a killed run); returns them.

    A file younger than ``min_age_s`` is left alone too: it may have been created a moment ago by
    a writer that has not taken its lock yet.
    """
    removed: list[Path] = []
    now = time.time()
    folder = Path(directory)
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(f".*{_TMP_SUFFIX}"):
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if now - os.fstat(fd).st_mtime < min_age_s:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live writer holds it
        else:
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
        finally:
            os.close(fd)
    return removed


def path_inside(root: Path, relative: str, *also: Path) -> Path | None:
    """``root/relative`` when it resolves inside ``root`` (or one of ``also``), else None.

    Resolving first means ``..``, an absolute path and a symlink pointing elsewhere are all
    "outside": a check on a file never reads ``/etc/shadow`` because a path or a link said so.
    """
    if not relative.strip() or "\0" in relative:
        return None
    path = root / relative
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    roots = [Path(r).resolve() for r in (root, *also)]
    return path if any(resolved == r or resolved.is_relative_to(r) for r in roots) else None
