"""16-bit mono PCM as fabtest handles it: WAV bytes in and out, resampling, joining, silence, loudness.

The standard library (``wave``, ``array``) suffices, so recording and viewing a voice conversation
needs no speech package. Where numpy is installed (the voice extra brings it), resampling and
loudness use it: a Python loop over every sample holds the GIL, and with 8 conversations at once
that would delay the agent loop, so every agent's time to first audio.
"""

from __future__ import annotations

import array
import io
import math
import sys
import wave
from collections.abc import Sequence
from typing import Any

from fabtest.conversation import Attachment, Audio, Turn

__all__ = ["as_file", "from_wav", "join", "pcm_bytes", "resample", "rms", "samples_of", "silence", "to_wav",
           "voice_files"]


def to_wav(audio: Audio) -> bytes:
    """The audio as a WAV file (RIFF, 16-bit mono), what the results directory keeps and a browser plays."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(audio.sample_rate)
        w.writeframes(audio.pcm)
    return out.getvalue()


def as_file(audio: Audio, name: str) -> Attachment:
    """The audio as a WAV file of the conversation: kept once by its sha256 under the results directory."""
    return Attachment(name=name, mime_type="audio/wav", data=to_wav(audio))


def from_wav(data: bytes) -> Audio:
    """A 16-bit mono WAV file as Audio; ValueError naming what is wrong with another kind of file."""
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2:
                raise ValueError(f"expected 16-bit mono WAV, got {w.getnchannels()} channel(s) of "
                                 f"{8 * w.getsampwidth()}-bit samples")
            return Audio(w.readframes(w.getnframes()), w.getframerate())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"not a WAV file: {exc}") from None


def samples_of(pcm: bytes) -> array.array[int]:
    """The samples of little-endian 16-bit PCM as integers."""
    samples = array.array("h")
    samples.frombytes(pcm)
    if sys.byteorder == "big":
        samples.byteswap()
    return samples


def pcm_bytes(samples: array.array[int]) -> bytes:
    """Integer samples back to little-endian 16-bit PCM."""
    if sys.byteorder == "big":
        samples = array.array("h", samples)
        samples.byteswap()
    return samples.tobytes()


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def resample(audio: Audio, rate: int) -> Audio:
    """The audio at ``rate`` Hz by linear interpolation: enough for a recogniser and a player."""
    if audio.sample_rate == rate or not audio.pcm:
        return Audio(audio.pcm, rate, audio.text) if audio.sample_rate != rate else audio
    np = _numpy()
    if np is not None:
        values = np.frombuffer(audio.pcm, dtype="<i2").astype(np.float64)
        n = max(1, round(len(values) * rate / audio.sample_rate))
        points = np.linspace(0, len(values) - 1, n)
        out = np.interp(points, np.arange(len(values)), values).astype("<i2")
        return Audio(out.tobytes(), rate, audio.text)
    src = samples_of(audio.pcm)
    n = max(1, round(len(src) * rate / audio.sample_rate))
    step = (len(src) - 1) / max(1, n - 1)
    out = array.array("h", bytes(2 * n))
    last = len(src) - 1
    for i in range(n):
        pos = i * step
        k = int(pos)
        frac = pos - k
        nxt = src[k + 1] if k < last else src[k]
        out[i] = int(src[k] + (nxt - src[k]) * frac)
    return Audio(pcm_bytes(out), rate, audio.text)


def join(chunks: Sequence[Audio], rate: int | None = None) -> Audio:
    """The chunks one after the other at ``rate`` (default: the first chunk's), their words joined."""
    if not chunks:
        return Audio(b"", rate or 16000)
    rate = rate or chunks[0].sample_rate
    texts = [c.text for c in chunks if c.text]
    return Audio(b"".join(resample(c, rate).pcm for c in chunks), rate,
                 " ".join(" ".join(texts).split()) if texts else None)


def silence(ms: float, rate: int = 16000) -> Audio:
    """``ms`` milliseconds of silence."""
    return Audio(bytes(2 * round(rate * ms / 1000)), rate)


def rms(audio: Audio) -> float:
    """Loudness as the root mean square of the samples, 0 (silence) to 1 (full scale)."""
    np = _numpy()
    if np is not None and audio.pcm:
        values = np.frombuffer(audio.pcm, dtype="<i2").astype(np.float64)
        return float(np.sqrt(np.mean(values * values))) / 32768
    samples = samples_of(audio.pcm)
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples)) / 32768


def voice_files(turn: Turn) -> list[Attachment]:
    """A voice turn's audio as WAV files: the user's, then the agent's when it sent any."""
    if turn.voice is None:
        return []
    files = [as_file(turn.voice.user_audio, f"turn{turn.number}-user.wav")]
    if turn.voice.agent_audio.pcm:
        files.append(as_file(turn.voice.agent_audio, f"turn{turn.number}-agent.wav"))
    return files
