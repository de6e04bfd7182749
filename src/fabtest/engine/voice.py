"""One voice turn: the user's words spoken, sent as audio, the agent's audio reply heard.

The scenario's thread speaks the user's text (the run's shared voice, :mod:`fabtest.speech.kit`),
hands the audio to the agent (:func:`fabtest.agents.voice.call_voice_agent`, on the agent loop,
where the first chunk is timed), then transcribes what it heard. The transcript becomes the turn's
response text, so the simulated user, the judge and every text check see what a caller would have
heard; the agent's own words, when its chunks carry them, are kept beside it with the word error rate.

A reply that cannot be heard fails the scenario with its cause: no audio at all, or audio in which
the recogniser hears no words (silence, noise, another language).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fabtest._internal.wav import join, rms, silence
from fabtest.agents.boundary import AgentDataError
from fabtest.agents.voice import VoiceReply, call_voice_agent
from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse, Audio, Status, Turn, VoiceTurn
from fabtest.errors import UsageError
from fabtest.speech.kit import SILENCE_RMS, Speech, shared

__all__ = ["VoiceTurns", "first_audio_outcome", "silence_text", "silent_seconds", "turns", "word_error_rate"]

_WORD = re.compile(r"[a-z0-9']+")


def silence_text(seconds: float) -> str:
    """The user's line of a silent turn, as the transcript and the judge read it."""
    return f"(the user stays silent for {seconds:g} s)"


_SILENCE = re.compile(r"\(the user stays silent for (\d+(?:\.\d+)?) s\)")


def silent_seconds(text: str) -> float | None:
    """The seconds of a recorded silent turn's line (a replay sends silence again, not those words)."""
    match = _SILENCE.fullmatch(text)
    return float(match.group(1)) if match else None


@dataclass
class VoiceTurns:
    """How a scenario's turns are spoken and heard (the process's shared :class:`Speech`)."""

    speech: Speech

    def take(self, agent: Any, text: str, *, timeout: float, turn: int, interrupt_after_ms: float | None = None,
             silent_s: float | None = None) -> tuple[AgentResponse, VoiceTurn, float]:
        """Speak ``text`` (or ``silent_s`` seconds of silence), send it, hear the reply; the third value
        is the seconds the agent took (fabtest's own speech work left out)."""
        user_audio = silence(silent_s * 1000) if silent_s is not None else self.speech.speak(text)
        reply = call_voice_agent(agent, user_audio, timeout=timeout, interrupt_after_ms=interrupt_after_ms)
        agent_audio = join(reply.chunks)
        if silent_s is None:
            _check_heard(reply, agent_audio, turn)
        heard = self.speech.hear(agent_audio)
        if not heard and silent_s is None and not reply.interrupted:
            loud = rms(agent_audio)
            why = ("it is silent" if loud < SILENCE_RMS
                   else f"it is not speech the recogniser knows (loudness {loud:.3f})")
            raise AgentDataError(f"the recogniser heard no words in the voice agent's reply to turn {turn} "
                                 f"({agent_audio.duration_ms / 1000:.1f} s of audio): {why}")
        own = reply.text
        voice = VoiceTurn(user_audio=user_audio, agent_audio=agent_audio,
                          time_to_first_audio_ms=reply.first_audio_ms, agent_text=own,
                          # cut short, the agent's words say more than was heard: no rate
                          word_error_rate=word_error_rate(own, heard) if own and not reply.interrupted else None,
                          interrupted=reply.interrupted)
        return AgentResponse(text=heard, tool_calls=reply.tool_calls), voice, reply.elapsed_s


def turns(settings: Settings) -> VoiceTurns:
    """The voice turns of a scenario under ``settings``: the process's shared voice and recogniser."""
    s = settings.speech
    return VoiceTurns(shared(s.tts, s.voice, s.rate, s.noise, s.recogniser, s.whisper_model, s.sample_rate))


def first_audio_outcome(turn: Turn, limit_ms: float) -> tuple[Status, str, dict[str, Any]]:
    """``the agent must start speaking within N ms`` on one turn: status, details, data."""
    if turn.voice is None:
        raise UsageError("the agent must start speaking: only in a voice scenario (tag it @voice)")
    first = turn.voice.time_to_first_audio_ms
    data: dict[str, Any] = {"limit_ms": limit_ms, "time_to_first_audio_ms": None if first is None else round(first, 1)}
    if first is None:
        return "failed", f"turn {turn.number}: the agent sent no audio", data
    ok = first <= limit_ms
    verdict = f"{'within' if ok else 'over'} {limit_ms:g} ms"
    return "passed" if ok else "failed", f"turn {turn.number}: first audio after {first:.0f} ms ({verdict})", data


def _check_heard(reply: VoiceReply, agent_audio: Audio, turn: int) -> None:
    if not reply.chunks or not agent_audio.pcm:
        raise AgentDataError(f"the voice agent sent no audio in reply to turn {turn}"
                             + (" (only empty chunks)" if reply.chunks else "")
                             + ": respond(audio) must yield fabtest.Audio with PCM samples")


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance over the reference's length (lower case, punctuation ignored): 0 is
    word for word; 1 is as many errors as words."""
    ref, hyp = _WORD.findall(reference.lower()), _WORD.findall(hypothesis.lower())
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1] / len(ref)
