"""``When the response mentions a booking reference as "ref"``: the judge copies a value out of the
reply. The prompt is product code: the request the model received is read back (what it is
shown, in what order)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fabtest.conversation import TokenUsage
from fabtest.engine.extract import EXTRACT_SYSTEM_PROMPT, extract
from fabtest.llm.base import LLMSettings
from fabtest.llm.factory import build_llm
from fabtest.testing import FakeGemini


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        yield server


def test_the_judge_is_shown_what_to_find_then_the_reply(fake: FakeGemini) -> None:
    fake.add_rule(r"WHAT TO FIND", json={"found": True, "value": " B-4711 "})
    charged: list[TokenUsage] = []
    llm = build_llm(LLMSettings(base_url=fake.base_url, timeout_s=5.0, max_retries=0))
    found = extract(llm, "a booking reference", "Done: your booking B-4711 is confirmed.", charge=charged.append)
    assert (found.found, found.value) == (True, "B-4711") and len(charged) == 1
    [request] = fake.requests
    assert request.system == EXTRACT_SYSTEM_PROMPT and request.wants_json
    prompt = request.prompt
    assert prompt.index("WHAT TO FIND\na booking reference") < prompt.index(
        "THE AGENT'S REPLY\nDone: your booking B-4711 is confirmed.") < prompt.index("exactly as written")


def test_found_without_a_value_is_not_found(fake: FakeGemini) -> None:
    fake.add_rule(r"WHAT TO FIND", json={"found": True, "value": "  "})
    llm = build_llm(LLMSettings(base_url=fake.base_url, timeout_s=5.0, max_retries=0))
    assert extract(llm, "the total", "no total here", charge=lambda usage: None).found is False
