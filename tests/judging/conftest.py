"""The FakeGemini server the judging tests script (the real google-genai client talks to it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fabtest.demo.offline_llm import offline_gemini
from fabtest.testing import FakeGemini


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with offline_gemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server
