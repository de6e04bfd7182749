"""Every core, automatically (issue 42, item 3): a run asking for more conversations at once than
one process sustains gets ``-n`` workers, each with its share, decided before pytest parses its
options; a run that says ``-n`` itself, a worker, or FABTEST_AUTO_WORKERS=0 is left alone."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from fabtest.pytest_plugin import auto_workers


class _Early:
    """What ``spread`` reads of pytest's early config."""

    def __init__(self, root: Path, **known: Any) -> None:
        self.rootpath = root
        self.known_args_namespace = argparse.Namespace(**{"numprocesses": None, "dist": "no", **known})
        self.stash = pytest.Stash()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.fabtest]\nconcurrency = 1000\n")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("FABTEST_AUTO_WORKERS", raising=False)
    monkeypatch.setattr(auto_workers.os, "cpu_count", lambda: 2)
    return tmp_path


def test_more_than_one_process_sustains_is_spread_over_the_cores_and_said(project: Path) -> None:
    early, args = _Early(project), ["features"]
    auto_workers.spread(early, args)  # type: ignore[arg-type]
    assert args == ["features", "-n", "2", "--fabtest-concurrency", "500"]
    assert "1000 conversations at once" in (auto_workers.header(early) or "")  # type: ignore[arg-type]
    assert "2 worker processes of 500" in (auto_workers.header(early) or "")  # type: ignore[arg-type]


def test_the_command_line_concurrency_counts_and_a_small_one_stays_in_one_process(project: Path) -> None:
    args = ["features"]
    auto_workers.spread(_Early(project, fabtest_concurrency=300), args)  # type: ignore[arg-type]
    assert args[1:] == ["-n", "2", "--fabtest-concurrency", "150"]
    args = ["features"]
    early = _Early(project, fabtest_concurrency=auto_workers.PER_PROCESS - 1)
    auto_workers.spread(early, args)  # type: ignore[arg-type]
    assert args == ["features"] and auto_workers.header(early) is None  # type: ignore[arg-type]


def test_thousands_at_once_get_more_workers_than_cores(project: Path) -> None:
    """A worker's CPU per conversation grows with its threads: past MOST_PER_WORKER conversations a
    worker, more workers than cores (5,000 on 2 cores: 4 of 1,250, measured 8.2x against 13.5x)."""
    args = ["features"]
    early = _Early(project, fabtest_concurrency=5000)
    auto_workers.spread(early, args)  # type: ignore[arg-type]
    assert args[1:] == ["-n", "4", "--fabtest-concurrency", "1250"]
    assert "4 worker processes of 1250" in (auto_workers.header(early) or "")  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["-n given", "no xdist", "worker", "asked not to", "one core", "until decided",
                                  "not fabtest"])
def test_left_alone(project: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    early = _Early(project)
    if case == "-n given":
        early.known_args_namespace.numprocesses = 4
    elif case == "no xdist":
        del early.known_args_namespace.numprocesses
    elif case == "worker":
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    elif case == "asked not to":
        monkeypatch.setenv("FABTEST_AUTO_WORKERS", "0")
    elif case == "one core":
        monkeypatch.setattr(auto_workers.os, "cpu_count", lambda: 1)
    elif case == "until decided":
        early.known_args_namespace.fabtest_until_decided = True
    else:
        (project / "pyproject.toml").write_text("[tool.other]\nconcurrency = 1000\n")
    args = ["features"]
    auto_workers.spread(early, args)  # type: ignore[arg-type]
    assert args == ["features"]
