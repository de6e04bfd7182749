"""The parts of voice scenarios on their own: the word error rate, WAV files, the voice agent call
(its shapes, tool calls, the time limit), the latency the gate reads, and the speech settings' errors."""

from __future__ import annotations

import asyncio

import pytest

import fabtest
from fabtest._internal import extras, wav
from fabtest._internal.wav import from_wav, join, resample, rms, to_wav
from fabtest.agents.registry import make_agent
from fabtest.agents.voice import call_voice_agent
from fabtest.compare.gate import latency_per_run
from fabtest.config.settings import Settings
from fabtest.engine.voice import word_error_rate
from fabtest.errors import AgentTimeout, UsageError
from fabtest.speech import kit

TONE = fabtest.Audio(bytes(range(256)) * 20, 16000)


@pytest.mark.parametrize(("reference", "heard", "rate"), [
    ("Your table for two is booked.", "your table for two is booked", 0.0),
    ("Your table for two is booked for tonight.", "your table for two spoke for tonight", 0.25),
    ("book a table", "", 1.0),
    ("", "", 0.0),
])
def test_word_error_rate_counts_word_edits_over_the_reference(reference: str, heard: str, rate: float) -> None:
    assert word_error_rate(reference, heard) == pytest.approx(rate)


def test_without_numpy_resampling_and_loudness_agree_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    with_numpy = resample(TONE, 22050), rms(TONE)
    monkeypatch.setattr(wav, "_numpy", lambda: None)
    plain = resample(TONE, 22050), rms(TONE)
    assert plain[1] == pytest.approx(with_numpy[1])
    assert len(plain[0].pcm) == len(with_numpy[0].pcm)
    pairs = zip(wav.samples_of(plain[0].pcm), wav.samples_of(with_numpy[0].pcm), strict=True)
    assert max(abs(a - b) for a, b in pairs) <= 1


def test_background_noise_is_the_same_for_the_same_words() -> None:
    speech = kit.build(tts="support.fake_speech:FakeVoice", recogniser="support.fake_speech:FakeEars", noise=0.01)
    first, again, other = speech.speak("hello"), speech.speak("hello"), speech.speak("hellp")
    assert first == again and first.pcm[:100] != other.pcm[:100] and first.pcm != kit.build(
        tts="support.fake_speech:FakeVoice", recogniser="support.fake_speech:FakeEars").speak("hello").pcm


def test_wav_files_round_trip_and_another_kind_is_named() -> None:
    assert from_wav(to_wav(TONE)) == TONE
    with pytest.raises(ValueError, match="not a WAV file"):
        from_wav(b"ID3 an mp3")
    assert resample(TONE, 8000).duration_ms == pytest.approx(TONE.duration_ms, abs=0.2)
    joined = join([fabtest.Audio(bytes(320), 16000, "a"), fabtest.Audio(bytes(441 * 2), 44100, "b")])
    assert joined.sample_rate == 16000 and joined.duration_ms == pytest.approx(20, abs=0.2) and joined.text == "a b"


def test_a_sync_respond_returning_chunks_runs_off_the_loop_and_reports_tool_calls() -> None:
    def respond(audio: fabtest.Audio, on_tool_call=None) -> list[fabtest.Audio]:
        on_tool_call({"name": "book_table", "arguments": {"people": 2}})
        return [fabtest.Audio(audio.pcm, 16000, "one"), fabtest.Audio(audio.pcm, 16000, "two")]

    reply = call_voice_agent(make_agent(respond, {}, where="test"), TONE, timeout=5)  # as configured
    assert reply.text == "one two" and [c.name for c in reply.tool_calls] == ["book_table"]
    assert reply.first_audio_ms is not None and not reply.interrupted


def test_an_async_respond_returning_one_chunk_and_a_slow_one_that_times_out() -> None:
    class Quick:
        async def respond(self, audio: fabtest.Audio) -> fabtest.Audio:
            return audio

    class Slow:
        async def respond(self, audio: fabtest.Audio):
            await asyncio.sleep(10)
            yield audio

    assert call_voice_agent(Quick(), TONE, timeout=5).chunks == [TONE]
    with pytest.raises(AgentTimeout, match="did not finish its reply within 0.2s"):
        call_voice_agent(Slow(), TONE, timeout=0.2)


def test_the_gate_reads_a_voice_turns_latency_as_its_time_to_first_audio() -> None:
    doc = {"scenario_results": [
        {"id": "example:a", "transcript": [{"duration_s": 3.0, "voice": {"time_to_first_audio_ms": 400.0}},
                                           {"duration_s": 2.0, "voice": {"time_to_first_audio_ms": 600.0}}]},
        {"id": "example:b", "transcript": [{"duration_s": 1.5}]},
    ]}
    assert latency_per_run(doc) == {"example:a": pytest.approx(0.5), "example:b": 1.5}


def test_an_unknown_voice_or_recogniser_stops_at_the_settings(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest.speech]\nrecogniser = "vosk"\n')
    with pytest.raises(UsageError, match=r"speech.recogniser: .*expected 'pocketsphinx' or 'faster-whisper' or "
                                         r'"module:attr", got .vosk.'):
        Settings.load(tmp_path)


def test_speech_settings_that_name_nothing_usable_are_one_line_each() -> None:
    with pytest.raises(UsageError, match='tts = .festival.: expected "piper", "espeak" or "module:attr"'):
        kit.build(tts="festival")
    with pytest.raises(UsageError, match="recogniser = 'support.fake_speech:FakeVoice': FakeVoice has no transcribe"):
        kit.build(tts="support.fake_speech:FakeVoice", recogniser="support.fake_speech:FakeVoice")
    with pytest.raises(UsageError, match=r"needs whisper_model"):
        kit.build(tts="support.fake_speech:FakeVoice", recogniser="faster-whisper")
    with pytest.raises(UsageError, match=r"pip install 'pytest-fabtest\[voice\]'"):
        extras.require_extra("voice", where="a voice scenario", module="no_such_speech_module")
