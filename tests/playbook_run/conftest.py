"""Fixtures for the playbook runner tests: the offline FakeGemini and a real Gemini client on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.llm.base import LLMSettings
from fabtest.llm.factory import build_llm
from fabtest.testing import FakeGemini



@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """The offline heuristic Gemini on 127.0.0.1, wired through the environment."""
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.delenv("FABTEST_PLAYBOOK_AGENT", raising=False)
        yield server


@pytest.fixture
def llm(fake: FakeGemini) -> Any:
    """A real GeminiLLM (google-genai) talking to the fake; used as judge and simulator."""
    return build_llm(LLMSettings(max_retries=1, timeout_s=5), backoff_base_s=0.01)


