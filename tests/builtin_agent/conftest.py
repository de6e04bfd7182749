"""Fixtures for the built-in agent: FakeGemini wired through the environment, the test MCP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fabtest.testing import FakeGemini

@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


@pytest.fixture
def pid_dir(tmp_path: Path) -> Path:
    """Where the test MCP server writes its pid (passed through the spec's env)."""
    folder = tmp_path / "pids"
    folder.mkdir()
    return folder
