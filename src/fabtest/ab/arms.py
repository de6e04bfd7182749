"""The two arms of ``fabtest ab``: where each one's code is, and the environment that makes it run.

An arm is a git ref, checked out with ``git worktree add`` into a temporary directory (the user's
working tree is never touched, and the checkout is removed afterwards, on errors and Ctrl-C too),
or ``.``, the working tree as it is (recorded dirty when it is). Each arm runs its own code: a
project installed in editable mode (``pip install -e .``) or with ``src/`` on a ``.pth`` path
resolves its package to the working tree from any directory, so a baseline checkout would
silently test the current agent. ``PYTHONPATH`` entries come before site-packages and the ``.pth``
paths, so the arm's ``src/`` and project directory are put first there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.errors import UsageError

__all__ = ["Arm", "ArmSpec", "checkout", "remove"]

_PROJECT_FILES = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini")


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """What the command line asked of one arm."""

    name: str  # "baseline" or "current"
    ref: str  # a git ref, or "." for the working tree
    agent: str | None = None  # --<arm>-agent: pytest's --fabtest-agent
    args: tuple[str, ...] = ()  # --<arm>-arg: more pytest arguments for this arm only
    env: Mapping[str, str] = field(default_factory=dict)  # --<arm>-env KEY=VALUE


@dataclass(slots=True)
class Arm:
    """One arm checked out: its project directory, commit and what to remove afterwards."""

    spec: ArmSpec
    root: Path  # the project directory pytest runs in
    commit: str | None
    dirty: bool | None
    worktree: Path | None = None  # the temporary checkout (None for ".")
    repo: Path | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with the arm's own source first on ``PYTHONPATH`` and its ``--<arm>-env`` values."""
        env = dict(base)
        own = [str(p) for p in (self.root / "src", self.root) if p.is_dir()]
        inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([*own, *inherited])
        env.update(self.spec.env)
        return env

    def pytest_args(self) -> list[str]:
        return ([f"--fabtest-agent={self.spec.agent}"] if self.spec.agent else []) + list(self.spec.args)

    def record(self) -> dict[str, Any]:
        """What the arm's experiment records as ``experiment.ab``."""
        out: dict[str, Any] = {"arm": self.name, "ref": self.spec.ref, "commit": self.commit, "dirty": self.dirty}
        if self.spec.agent:
            out["agent"] = self.spec.agent
        if self.spec.args:
            out["args"] = list(self.spec.args)
        if self.spec.env:
            out["env"] = sorted(self.spec.env)  # the names only: a value may be a secret
        return out


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _out(args: Sequence[str], cwd: Path) -> str | None:
    try:
        done = _git(args, cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checkout(spec: ArmSpec, cwd: Path, scratch: Path) -> Arm:
    """The arm ``spec`` asks for, checked out under ``scratch`` when it is a ref. UsageError (one
    line) for an unknown ref, a ref without the project, or a ref outside a git repository."""
    top = _out(["rev-parse", "--show-toplevel"], cwd)
    if spec.ref == ".":
        commit = _out(["rev-parse", "HEAD"], cwd) if top else None
        dirty = bool(_out(["status", "--porcelain"], cwd)) if top else None
        return Arm(spec, cwd, commit, dirty)
    if top is None:
        raise UsageError(f"{spec.name} {spec.ref!r}: {cwd} is not in a git repository (a ref needs one; use '.' "
                         "for the working tree)")
    commit = _out(["rev-parse", "--verify", "--quiet", f"{spec.ref}^{{commit}}"], cwd)
    if not commit:
        raise UsageError(f"{spec.name} {spec.ref!r}: unknown git ref (git rev-parse found no commit; try "
                         "`git fetch` or a branch, tag or commit that exists)")
    prefix = _out(["rev-parse", "--show-prefix"], cwd) or ""
    path = scratch / spec.name
    done = _git(["worktree", "add", "--detach", "--quiet", str(path), commit], Path(top))
    if done.returncode != 0:
        raise UsageError(f"{spec.name} {spec.ref!r}: git worktree add failed: "
                         f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    arm = Arm(spec, path / prefix, commit, False, path, Path(top))
    if not any((arm.root / name).is_file() for name in _PROJECT_FILES):
        remove(arm)
        where = prefix.rstrip("/") or "the repository root"
        raise UsageError(f"{spec.name} {spec.ref!r}: no project at {where} in that commit (no "
                         f"{' or '.join(_PROJECT_FILES)}); is it a commit from before the project existed?")
    return arm


def remove(arm: Arm) -> None:
    """Remove the arm's temporary checkout (nothing for ``.``); never raises."""
    if arm.worktree is None or arm.repo is None:
        return
    try:
        _git(["worktree", "remove", "--force", str(arm.worktree)], arm.repo)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if arm.worktree.exists():
        shutil.rmtree(arm.worktree, ignore_errors=True)
        try:
            _git(["worktree", "prune"], arm.repo)
        except (OSError, subprocess.TimeoutExpired):
            pass
