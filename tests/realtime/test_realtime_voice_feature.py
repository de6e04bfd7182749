"""A voice feature through the Realtime agent against FakeRealtime, in-process: spoken turns heard back, the
server's tool call checked, a barge-in, and the key in the headers never in the results. The stand-in speech of
tests/support/fake_speech.py speaks and hears (the real engines are tests/voice/test_real_speech.py's)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fake_speech import decode, encode

import fabtest
from fabtest.testing import FakeRealtime, FunctionCall, RealtimeReply

KEY = "sk-fake-realtime-key-1234"

FEATURE = """
@voice
Feature: Phone bookings
  Scenario: Booking
    When the user says "book a table for two"
    Then the response must match "you said book a table for two"
    And the agent must call "book_table" with:
      | argument | value                |
      | request  | book a table for two |

  Scenario: Cut in
    When the user says "what is on the menu tonight"
    And the user interrupts after 300 ms with "just book it"
    Then the response must match "you said just book it"
"""


def echo(heard: fabtest.Audio) -> RealtimeReply:
    """The fake's model: hears the user (24 kHz), says "you said ..." with its transcript, and books."""
    words = decode(heard)
    said = f"you said {words}"
    return RealtimeReply(audio=encode(said), transcript=said, chunk_ms=100, pace_s=0.01,
                         function_call=FunctionCall("book_table", {"request": words}) if "book" in words else None)


def test_a_voice_feature_runs_through_the_realtime_agent(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_REALTIME_KEY", KEY)
    with FakeRealtime(echo, api_key=KEY) as fake:
        pytester.makepyprojecttoml(f"""
[tool.fabtest]
results_dir = "results"

[tool.fabtest.agent]
realtime = "{fake.url}"
model = "fake-model"
voice = "marin"
headers = {{ Authorization = "Bearer ${{FAKE_REALTIME_KEY}}" }}

[tool.fabtest.speech]
tts = "support.fake_speech:FakeVoice"
recogniser = "support.fake_speech:FakeEars"
""")
        pytester.makefile(".feature", phone=FEATURE)
        result = pytester.runpytest_inprocess("-p", "no:randomly", "--fabtest-experiment-id", "exp_rt")
    result.assert_outcomes(passed=2)
    raw = (pytester.path / "results" / "exp_rt.json").read_text()
    assert KEY not in raw and KEY not in result.stdout.str()
    runs: dict[str, Any] = {s["name"]: s for s in json.loads(raw)["scenario_results"]}
    [booking] = runs["Booking"]["transcript"]
    assert booking["agent"] == "you said book a table for two"  # what the recogniser heard
    assert booking["voice"]["agent_text"] == "you said book a table for two"  # the model's own transcript
    assert booking["voice"]["word_error_rate"] == 0.0
    cut, after = runs["Cut in"]["transcript"]
    assert cut["voice"]["interrupted"] is True and after["agent"] == "you said just book it"
    assert len(fake.connections) == 2 and all(c.closed for c in fake.connections)  # one per scenario, closed
    assert "response.cancel" in fake.connections[1].types
    assert all(c.headers["authorization"] == f"Bearer {KEY}" for c in fake.connections)
