"""Which code an experiment ran on: commit, branch and whether the work tree was dirty.

Never raises: without git, outside a repository, or on a slow/hung git, every field is None, so
recording an experiment cannot fail because of version-control trouble.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GitInfo", "git_info"]

_TIMEOUT_S = 3.0
# Variables that would point git at another repository than the directory we ask about.
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


@dataclass(frozen=True)
class GitInfo:
    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


def _git(args: list[str], cwd: Path) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


def git_info(cwd: str | os.PathLike[str] | None = None) -> GitInfo:
    """Commit, branch (None when detached) and dirty flag (tracked files only) of ``cwd``."""
    where = Path(cwd) if cwd is not None else Path.cwd()
    if not where.is_dir():
        return GitInfo()
    commit = _git(["rev-parse", "HEAD"], where)
    if not commit:
        return GitInfo()
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], where)
    if branch == "HEAD":  # detached head
        branch = None
    # Untracked files (results, caches) do not make the tree dirty: only edits to tracked code do.
    status = _git(["status", "--porcelain", "--untracked-files=no"], where)
    return GitInfo(commit=commit, branch=branch or None, dirty=None if status is None else bool(status))
