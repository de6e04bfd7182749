"""Does the installed Gemini CLI accept ``--acp``? Asked once per installed CLI, not once per run.

The question costs a whole CLI start (``gemini --help``: Node, the CLI's bundle and its relaunch,
3-8 s, as long as a ``gemini -p`` run), and a ``fabtest run`` used to pay it before the agent even
started, on every run. The answer only changes when the CLI is reinstalled, so it is kept in
``$XDG_CACHE_HOME/fabtest/gemini-cli.json`` (``~/.cache/...``), keyed by the executable's resolved
path, size and modification time: an upgrade or reinstall rewrites the file and is asked again.
Only answers from a ``--help`` that ran are kept (a timeout or a missing program is not), and a
cache that cannot be read or written is only a slower run. ``FABTEST_GEMINI_TRANSPORT`` still
overrides the answer (docs/how-to/acp-agent.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["cache_file", "gemini_supports_acp"]

_SUPPORTS: dict[str, bool] = {}  # this process's answers, by executable as named
_LOCK = threading.Lock()
_PROBE_TIMEOUT_S = 30


def cache_file() -> Path:
    """Where the answers are kept across runs (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fabtest" / "gemini-cli.json"


def gemini_supports_acp(executable: str = "gemini") -> bool:
    """Does ``executable --help`` list ``--acp``? Cached per process and, per installed file, across runs."""
    with _LOCK:
        if executable not in _SUPPORTS:
            _SUPPORTS[executable] = _answer(executable)
        return _SUPPORTS[executable]


def _answer(executable: str) -> bool:
    key = _key(executable)
    if key is None:
        return False  # not found: the pre-flight names the missing program
    known = _read().get(key)
    if isinstance(known, bool):
        return known
    try:
        out = subprocess.run([executable, "--help"], capture_output=True, timeout=_PROBE_TIMEOUT_S,
                             stdin=subprocess.DEVNULL, text=True, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return False  # not remembered: the next run asks again
    supports = "--acp" in out.stdout + out.stderr
    _write(key, supports)
    return supports


def _key(executable: str) -> str | None:
    """The resolved file with its size and modification time: a reinstall changes the key."""
    found = shutil.which(executable)
    if found is None:
        return None
    real = os.path.realpath(found)
    try:
        stat = os.stat(real)
    except OSError:
        return None
    return f"{real}|{stat.st_size}|{stat.st_mtime_ns}"


def _read() -> dict[str, object]:
    try:
        data = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(key: str, supports: bool) -> None:
    """Add one answer, atomically (a concurrent run reads the old file or the new one, never half)."""
    path = cache_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in _read().items() if not k.startswith(key.split("|", 1)[0] + "|")}
        data[key] = supports
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".gemini-cli.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
