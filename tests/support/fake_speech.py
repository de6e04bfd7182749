"""A stand-in voice and recogniser for voice tests that are about fabtest's plumbing, not about speech:
each character becomes 30 ms of one loud sample value at 16 kHz, and the recogniser reads them back.
The real engines (Piper, PocketSphinx) are exercised by tests/voice/test_real_speech.py."""

from __future__ import annotations

import array

import fabtest

RATE = 16000
PER_CHAR = 480  # samples: 30 ms a character


def encode(text: str) -> fabtest.Audio:
    samples = array.array("h", [0] * (PER_CHAR * len(text)))
    for i, ch in enumerate(text):
        value = (ord(ch) - 31) * 200 if 32 <= ord(ch) < 127 else 200
        samples[i * PER_CHAR:(i + 1) * PER_CHAR] = array.array("h", [value] * PER_CHAR)
    return fabtest.Audio(samples.tobytes(), RATE, text=None)


def decode(audio: fabtest.Audio) -> str:
    samples = array.array("h")
    samples.frombytes(audio.pcm)
    step = round(PER_CHAR * audio.sample_rate / RATE)
    out = []
    for start in range(0, len(samples) - step + 1, step):
        value = samples[start + step // 2]
        if value > 100:
            out.append(chr(round(value / 200) + 31))
    return " ".join("".join(out).split())


class FakeVoice:
    """``tts = "support.fake_speech:FakeVoice"``; ``speak`` counts its calls."""

    def __init__(self, **_settings: object) -> None:
        self.spoken: list[str] = []

    def speak(self, text: str) -> fabtest.Audio:
        self.spoken.append(text)
        return encode(text)


class FakeEars:
    """``recogniser = "support.fake_speech:FakeEars"``."""

    def __init__(self, **_settings: object) -> None:
        pass

    def transcribe(self, audio: fabtest.Audio) -> str:
        return decode(audio)
