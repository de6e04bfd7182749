"""The default recogniser: CMU PocketSphinx with the US English model bundled in the ``pocketsphinx``
wheel (acoustic model, language model and dictionary: nothing is downloaded)."""

from __future__ import annotations

import threading
from typing import Any

from fabtest._internal.wav import resample
from fabtest.conversation import Audio

__all__ = ["SphinxRecogniser"]

_RATE = 16000


class SphinxRecogniser:
    """Transcribes audio with one PocketSphinx decoder (a decoder decodes one utterance at a time)."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self._decoder: Any = Decoder(samprate=_RATE, loglevel="FATAL")
        self._lock = threading.Lock()

    def transcribe(self, audio: Audio) -> str:
        pcm = resample(audio, _RATE).pcm
        with self._lock:
            self._decoder.start_utt()
            self._decoder.process_raw(pcm, full_utt=True)
            self._decoder.end_utt()
            hyp = self._decoder.hyp()
        return " ".join(hyp.hypstr.split()) if hyp is not None else ""
