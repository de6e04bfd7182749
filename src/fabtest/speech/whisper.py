"""faster-whisper as the recogniser, for users who have a Whisper model on disk (``recogniser =
"faster-whisper"`` with ``whisper_model = "path/to/model"``); it is never downloaded by fabtest."""

from __future__ import annotations

import threading
from typing import Any

from fabtest._internal.wav import resample
from fabtest.conversation import Audio
from fabtest.errors import UsageError

__all__ = ["WhisperRecogniser"]

_RATE = 16000


class WhisperRecogniser:
    """Transcribes audio with a local CTranslate2 Whisper model on the CPU."""

    def __init__(self, model: str | None) -> None:
        if not model:
            raise UsageError("[tool.fabtest.speech] recogniser = \"faster-whisper\" needs whisper_model = "
                             "\"path/to/model\" (a model you have: fabtest downloads nothing)")
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise UsageError("[tool.fabtest.speech] recogniser = \"faster-whisper\" needs the faster-whisper "
                             "package: pip install faster-whisper") from None
        try:
            self._model: Any = WhisperModel(model, device="cpu", compute_type="int8", local_files_only=True)
        except Exception as exc:  # the model's files: name the path, not CTranslate2's frames
            raise UsageError(f"[tool.fabtest.speech] whisper_model = {model!r}: cannot load it: {exc}") from None
        self._lock = threading.Lock()

    def transcribe(self, audio: Audio) -> str:
        import numpy as np

        pcm = resample(audio, _RATE).pcm
        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768
        with self._lock:
            segments, _info = self._model.transcribe(samples, language="en", beam_size=1)
            text = " ".join(s.text for s in segments)
        return " ".join(text.split())
