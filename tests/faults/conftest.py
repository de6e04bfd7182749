"""Fixtures for the fault tests (helpers live in fault_helpers.py, importable from here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fault_helpers import handler  # noqa: E402

from fabtest.testing import FakeGemini  # noqa: E402


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT",
                "FABTEST_RESULTS_DIR", "FABTEST_AGENT_TIMEOUT", "FABTEST_LLM_CACHE", "FABTEST_JUDGE_PROVIDER",
                "FABTEST_SIMULATOR_PROVIDER"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fake(clean_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini(handler=handler) as server:
        server.timeout_fault_s = 3.0
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server
