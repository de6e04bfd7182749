"""The light voice: eSpeak NG (``espeakng-loader`` ships its library and data), through its C API.

Formant synthesis: robotic but instant (a few milliseconds an utterance) and small. eSpeak NG keeps
one global state per process, so every call holds the lock.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from fabtest.conversation import Audio
from fabtest.errors import UsageError

__all__ = ["EspeakSynthesizer"]

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_ESPEAK_RATE = 1
_POS_CHARACTER = 1
_ESPEAK_CHARS_UTF8 = 1
_DEFAULT_WPM = 175
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
_lock = threading.Lock()
_library: dict[str, Any] = {}


class EspeakSynthesizer:
    """Speaks text with an eSpeak NG voice (``en-us`` by default); ``rate`` above 1 speaks faster."""

    def __init__(self, voice: str | None = None, *, rate: float = 1.0) -> None:
        self._voice = (voice or "en-us").encode()
        self._wpm = max(80, min(450, round(_DEFAULT_WPM * rate)))
        with _lock:
            self._lib, self._sample_rate = _load()
            if self._lib.espeak_SetVoiceByName(self._voice) != 0:
                raise UsageError(f"[tool.fabtest.speech] voice = {voice!r}: eSpeak NG has no such voice "
                                 "(try \"en-us\", \"en-gb\", \"fr\")")

    def speak(self, text: str) -> Audio:
        data = text.encode()
        out = bytearray()

        def _take(wav: Any, count: int, _events: Any) -> int:
            if wav and count > 0:
                out.extend(ctypes.string_at(wav, count * 2))
            return 0

        callback = _CALLBACK(_take)
        with _lock:
            self._lib.espeak_SetSynthCallback(callback)
            self._lib.espeak_SetVoiceByName(self._voice)
            self._lib.espeak_SetParameter(_ESPEAK_RATE, self._wpm, 0)
            self._lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _ESPEAK_CHARS_UTF8, None, None)
            self._lib.espeak_Synchronize()
        return Audio(bytes(out), self._sample_rate)


def _load() -> tuple[Any, int]:
    """The library, initialised once per process for synchronous output; its sample rate."""
    if "lib" not in _library:
        import espeakng_loader

        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0)
        if rate <= 0:
            raise UsageError("eSpeak NG could not start (espeakng-loader's library or data is missing)")
        _library["lib"], _library["rate"] = lib, rate
    return _library["lib"], _library["rate"]
