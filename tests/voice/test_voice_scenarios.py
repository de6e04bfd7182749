"""Voice scenarios end to end in-process (docs/how-to/voice.md), with the stand-in speech of
tests/support/fake_speech.py: each user turn spoken and sent as audio, the reply heard, the times,
barge-in and silence, the records (JSON and WAV files) and one clear failure per bad reply."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from support.fake_speech import decode

from fabtest._internal.wav import from_wav
from fabtest.view.catalog import Catalog
from fabtest.view.layout import conversation_path
from fabtest.view.site import Site

PYPROJECT = """
[tool.fabtest]
agent = "voice_bots:Echo"
results_dir = "results"

[tool.fabtest.speech]
tts = "support.fake_speech:FakeVoice"
recogniser = "support.fake_speech:FakeEars"

[tool.fabtest.agents]
text_only = "voice_bots:text_only"
chat_only = "voice_bots:ChatOnly"
no_audio = "voice_bots:NoAudio"
wrong_type = "voice_bots:WrongType"
odd_bytes = "voice_bots:OddBytes"
silent = "voice_bots:Silent"
"""

AGENTS = '''
import fabtest
from support.fake_speech import decode, encode

CLOSED = []


class Echo:
    """Hears the user, answers "you said ..." in 100 ms chunks; its words ride on the first chunk."""

    async def respond(self, audio):
        words = decode(audio)
        reply = f"you said {words}" if words else "are you still there"
        pcm = encode(reply).pcm
        try:
            for i in range(0, len(pcm), 3200):
                # its own words in capitals: what the checks read must be what was heard, not these
                yield fabtest.Audio(pcm[i:i + 3200], 16000, text=reply.upper() if i == 0 else None)
        except GeneratorExit:
            CLOSED.append(words)
            raise


def text_only(messages):
    return "hello"


class ChatOnly:
    def chat(self, messages):
        return "hello"


class NoAudio:
    async def respond(self, audio):
        return
        yield


class WrongType:
    async def respond(self, audio):
        yield b"raw bytes"


class OddBytes:
    def respond(self, audio):
        return fabtest.Audio(b"abc", 16000)


class Silent:
    def respond(self, audio):
        return fabtest.Audio(bytes(32000), 16000)
'''


def _run(pytester: pytest.Pytester, feature: str, *args: str) -> tuple[Any, dict[str, Any]]:
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makepyfile(voice_bots=AGENTS)
    pytester.makefile(".feature", voice=feature)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--fabtest-experiment-id", "exp_voice", *args)
    doc = json.loads((pytester.path / "results" / "exp_voice.json").read_text())
    return result, {s["name"]: s for s in doc["scenario_results"]}


def test_a_spoken_turn_is_heard_checked_and_recorded_with_both_sides_audio(pytester: pytest.Pytester) -> None:
    result, runs = _run(pytester, """
@voice
Feature: Phone
  Scenario: Booking
    When the user says "book a table for two"
    Then the agent must start speaking within 5000 ms
    And the response must match "you said book a table for two"
""")
    result.assert_outcomes(passed=1)
    [turn] = runs["Booking"]["transcript"]
    assert turn["user"] == "book a table for two"
    assert turn["agent"] == "you said book a table for two"  # what the recogniser heard
    voice = turn["voice"]
    assert voice["agent_text"] == "YOU SAID BOOK A TABLE FOR TWO"
    assert voice["word_error_rate"] == 0.0 and voice["interrupted"] is False
    assert 0 <= voice["time_to_first_audio_ms"] < 5000
    assert voice["reply_audio_ms"] == pytest.approx(len("you said book a table for two") * 30, abs=1)
    for side, text in (("user_audio", "book a table for two"), ("agent_audio", "you said book a table for two")):
        record = voice[side]
        kept = (pytester.path / "results" / "files" / record["sha256"]).read_bytes()
        assert hashlib.sha256(kept).hexdigest() == record["sha256"] and record["mime_type"] == "audio/wav"
        assert decode(from_wav(kept)) == text
    [check] = [c for c in runs["Booking"]["expectations"]["details"] if c["type"] == "first_audio"]
    assert check["status"] == "passed" and check["limit_ms"] == 5000

    summary = json.loads((pytester.path / "results" / "exp_voice.json").read_text())["summary"]["voice"]
    assert summary["turns"] == 1 and summary["word_error_rate"] == 0.0 and summary["interrupted"] == 0
    assert summary["time_to_first_audio_ms"]["p95"] == voice["time_to_first_audio_ms"]

    # fabtest view plays both sides, the transcript beside them, and serves the WAVs as audio
    site = Site(Catalog(pytester.path / "results"))
    page = site.render(conversation_path("exp_voice", runs["Booking"]["id"], 1))
    assert page is not None
    body = page.body.decode()
    for side in ("user_audio", "agent_audio"):
        src = f'files/{voice[side]["sha256"]}/{voice[side]["name"]}'
        assert f'<audio class="voice" controls preload="none" src="../../{src}">' in body
        served = site.render(src)
        assert served is not None and served.content_type == "audio/wav"
    agent_side = body[body.index('<div class="msg agent">'):]
    assert agent_side.index("you said book a table for two") < agent_side.index("<audio")
    assert "first audio after" in agent_side and "word error rate 0.00" in agent_side


def test_barge_in_closes_the_stream_keeps_what_was_heard_and_sends_the_new_words(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(voicellm="""
import json

from fabtest.testing import FakeLLM

SEEN = {"simulator": [], "judge": []}


def _keep():
    with open("seen.json", "w") as out:
        json.dump(SEEN, out)


def _user(call):
    SEEN["simulator"].append([[m.role, m.content] for m in call.conversation.messages])
    _keep()
    return "book a table" if len(SEEN["simulator"]) == 1 else None


def _verdict(call):
    SEEN["judge"].append(call.subject)
    _keep()
    return "passed"


fake = FakeLLM().simulated_user(_user).verdicts(default=_verdict)
""")
    pytester.makeconftest("""
import pytest
import voice_bots

@pytest.fixture(autouse=True)
def _report_closed():
    yield
    print("CLOSED=" + repr(voice_bots.CLOSED))
""")
    result, runs = _run(pytester, """
@voice
Feature: Phone
  Scenario: Cut in
    When the user says "what is on the menu tonight"
    And the user interrupts after 300 ms with "just book a table"
    Then the response must match "you said just book a table"

  Scenario: Quiet caller
    When the user stays silent for 2 seconds
    Then the response must match "are you still there"

  Scenario: Simulated caller
    Given a simulated user with the goal "Book a table"
    When the simulated user talks to the agent
    Then the conversation should satisfy "polite"
""", "-s", "--fabtest-fake-llm", "voicellm:fake")
    result.assert_outcomes(passed=3)
    # the simulated user and the judge read what was heard of the agent's audio
    seen = json.loads((pytester.path / "seen.json").read_text())
    assert seen["simulator"][1] == [["user", "book a table"], ["agent", "you said book a table"]]
    assert "you said book a table" in seen["judge"][0]
    [simulated] = runs["Simulated caller"]["transcript"]
    assert simulated["voice"]["agent_text"] == "YOU SAID BOOK A TABLE"
    assert "CLOSED=['what is on the menu tonight']" in result.stdout.str()  # the agent saw GeneratorExit
    first, second = runs["Cut in"]["transcript"]
    assert first["voice"]["interrupted"] is True
    assert first["voice"]["reply_audio_ms"] == pytest.approx(300, abs=1)
    assert first["agent"] == "you said w" and first["voice"]["word_error_rate"] is None  # 10 characters heard
    assert second["user"] == "just book a table" and second["voice"]["interrupted"] is False
    [silent] = runs["Quiet caller"]["transcript"]
    assert silent["user"] == "(the user stays silent for 2 s)"
    assert silent["voice"]["user_audio"]["duration_ms"] == 2000


BAD = {
    "no_audio": "the voice agent sent no audio in reply to turn 1",
    "wrong_type": "the voice agent sent bytes as audio chunk #1; each chunk must be fabtest.Audio",
    "odd_bytes": "the voice agent raised ValueError: Audio: pcm has an odd number of bytes (3)",
    "silent": "the recogniser heard no words in the voice agent's reply to turn 1 (1.0 s of audio): it is silent",
    "text_only": "the voice agent answered with text, not audio",
    "chat_only": "has no respond(audio) method, so it cannot take a voice scenario",
}


def test_each_reply_that_cannot_be_heard_is_one_failure_naming_its_cause(pytester: pytest.Pytester) -> None:
    scenarios = "".join(f"""
  @voice
  Scenario: {agent}
    Given the agent "{agent}"
    When the user says "hello"
""" for agent in BAD)
    result, runs = _run(pytester, "Feature: Bad replies\n" + scenarios + """
  Scenario: voice agent typed to
    When the user says "hello"

  Scenario: silence typed
    Given the agent "text_only"
    When the user stays silent for 2 seconds
""")
    result.assert_outcomes(failed=len(BAD) + 2)
    for agent, cause in BAD.items():
        assert cause in runs[agent]["failure_message"], runs[agent]["failure_message"]
    assert "mark the scenario @voice or set voice = true" in runs["voice agent typed to"]["failure_message"]
    assert "the user stays silent only in a voice scenario: tag it @voice" in runs["silence typed"]["failure_message"]
    assert "Traceback" not in result.stdout.str()
