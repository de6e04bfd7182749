"""A fresh temporary workspace per playbook run, with ``tmpdir.link_paths`` symlinked in.

    with Workspace(playbook.link_paths, repo_root=Path.cwd(), source=playbook.source) as ws:
        agent = CliAgent(..., cwd=ws.path)
        ...
        if not passed:
            ws.mark_failed()
    # passed: the directory is gone; failed (or an exception): kept, ws.kept_path says where

Each link path is relative to the repository root and appears at the same relative place in the
workspace. An absolute path, or one whose ``..`` climbs out of the repository, is refused; a
path that does not exist is an error, and so is a symlink in the repository whose target lies
outside it (symlinks are resolved before the check). All are :class:`PlaybookError`, raised
before the directory is created.

Success criteria (``files_exist`` / ``files_contain``) read files through :func:`workspace_file`,
which refuses anything that resolves outside the workspace and the repository, so a playbook (or
an agent that plants a symlink) cannot make fabtest read ``/etc/shadow`` into a result.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from types import TracebackType

from fabtest._internal.files import path_inside
from fabtest.playbook.load import PlaybookError, workspace_path_problem

__all__ = ["Workspace", "workspace_file"]


def workspace_file(workspace: Path, rel: str, repo_root: Path | None = None) -> Path | None:
    """``workspace/rel`` when it stays inside the workspace (or the repository, via a link), else None.

    The check is made on the resolved path, so a symlink planted in the workspace that points
    elsewhere reads as "outside", the same as an absolute or ``..`` path.
    """
    if workspace_path_problem(rel) is not None:
        return None
    return path_inside(workspace, rel, *([Path(repo_root)] if repo_root is not None else []))


class Workspace:
    """Context manager: a temp dir with symlinks, removed after a pass, kept after a failure."""

    def __init__(
        self,
        link_paths: Iterable[str] = (),
        *,
        repo_root: str | os.PathLike[str] | None = None,
        keep_on_failure: bool = True,
        prefix: str = "fabtest-playbook-",
        base_dir: str | os.PathLike[str] | None = None,
        source: str | None = None,
        announce: bool = True,
    ) -> None:
        self.repo_root = Path(repo_root if repo_root is not None else os.getcwd()).absolute()
        self.link_paths = list(link_paths)
        self.keep_on_failure = keep_on_failure
        self.prefix = prefix
        self.base_dir = str(base_dir) if base_dir is not None else None
        self.source = source
        self.announce = announce
        self.path: Path | None = None
        self.failed = False
        self.kept_path: Path | None = None
        self.links: dict[str, Path] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Workspace:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(passed=exc_type is None and not self.failed)

    def open(self) -> Workspace:
        resolved = [(os.path.normpath(rel), self.resolve_link(i, rel)) for i, rel in enumerate(self.link_paths)]
        self.path = Path(tempfile.mkdtemp(prefix=self.prefix, dir=self.base_dir)).resolve()
        try:
            for rel, target in resolved:
                dest = self.path / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                if dest.exists() or dest.is_symlink():
                    continue  # a parent directory link already provides it
                dest.symlink_to(target, target_is_directory=target.is_dir())
                self.links[rel] = dest
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
            raise
        return self

    def mark_failed(self) -> None:
        """The run failed: keep the directory on close."""
        self.failed = True

    def close(self, passed: bool = True) -> Path | None:
        """Remove the directory after a pass; keep it (and return and announce its path) otherwise."""
        if self.path is None:
            return self.kept_path
        path, self.path = self.path, None
        if not passed and self.keep_on_failure:
            self.kept_path = path
            if self.announce:
                print(f"fabtest: workspace kept at {path}", file=sys.stderr)
            return path
        _remove(path)
        return None

    # -- links ----------------------------------------------------------------------------------

    def resolve_link(self, index: int, rel: str) -> Path:
        """The repository path a link entry points at; PlaybookError when refused or missing."""
        where = f"{self.source}: " if self.source else ""
        place = f"tmpdir.link_paths[{index}]"
        if not isinstance(rel, str) or not rel.strip():
            raise PlaybookError(f"{where}{place}: empty path")
        if os.path.isabs(rel) or PurePosixPath(rel).is_absolute() or (len(rel) > 1 and rel[1] == ":"):
            raise PlaybookError(f"{where}{place}: {rel!r} is absolute; link paths are relative to the repository")
        normal = os.path.normpath(rel)
        if normal == "." or normal == ".." or normal.startswith(".." + os.sep):
            raise PlaybookError(f"{where}{place}: {rel!r} is outside the repository {self.repo_root}")
        target = self.repo_root / normal
        if not (target.exists() or target.is_symlink()):
            raise PlaybookError(f"{where}{place}: {rel!r} does not exist in {self.repo_root}")
        try:
            resolved = target.resolve(strict=True)
        except (OSError, RuntimeError):
            raise PlaybookError(f"{where}{place}: {rel!r} is a broken or looping symlink") from None
        root = self.repo_root.resolve()
        if not (resolved == root or resolved.is_relative_to(root)):
            raise PlaybookError(f"{where}{place}: {rel!r} is a symlink to {str(resolved)!r}, outside the repository "
                                f"{root}; link the real path inside the repository instead")
        if resolved == root:
            raise PlaybookError(f"{where}{place}: {rel!r} is the repository itself; link the paths the agent needs")
        return target


def _remove(path: Path) -> None:
    """Delete the workspace without following symlinks into the repository."""
    shutil.rmtree(path, ignore_errors=True)
