"""Every test here plays a new user on a machine with no key: no LLM variable leaks in from the shell."""

from __future__ import annotations

import pytest

_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT",
        "FABTEST_RESULTS_DIR", "FABTEST_JUDGE_PROVIDER", "FABTEST_SIMULATOR_PROVIDER")


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
