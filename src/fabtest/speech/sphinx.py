"""The default recogniser: CMU PocketSphinx with the US English model bundled in the ``pocketsphinx``
wheel (acoustic model, language model and dictionary: nothing is downloaded)."""

from __future__ import annotations

import threading
from typing import Any

from fabtest._internal.wav import resample
from fabtest.conversation import Audio

__all__ = ["SphinxRecogniser"]

_RATE = 16000
#: bytes fed to the decoder per call: 50 ms. PocketSphinx holds the GIL for the whole of a call, so a
#: whole reply at once (a second of CPU or more) would stall the agent loop, and with it every other
#: conversation's time to first audio; between small calls the other threads run.
_PIECE = _RATE // 20 * 2


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
            for start in range(0, len(pcm), _PIECE):
                self._decoder.process_raw(pcm[start:start + _PIECE], full_utt=False)
            self._decoder.end_utt()
            hyp = self._decoder.hyp()
        return " ".join(hyp.hypstr.split()) if hyp is not None else ""
