"""16-bit mono PCM at another sample rate, with the standard library only.

A voice stack fixes its own rate (the OpenAI Realtime protocol takes 24 kHz pcm16), while fabtest's
voices and recognisers work at theirs (16 kHz). ``audioop`` left the standard library in Python 3.13
and numpy is not a dependency, so this is linear interpolation over :mod:`array`: about 10 ms of CPU
per second of speech, and speech keeps its words (the band above 8 kHz that a better filter would
keep carries no phonemes a recogniser uses).
"""

from __future__ import annotations

import sys
from array import array

__all__ = ["resample"]


def resample(pcm: bytes, source_rate: int, target_rate: int) -> bytes:
    """``pcm`` (16-bit little-endian mono at ``source_rate`` Hz) at ``target_rate`` Hz, same length in time."""
    if source_rate == target_rate or not pcm:
        return pcm
    samples = array("h")
    samples.frombytes(pcm)
    if sys.byteorder == "big":
        samples.byteswap()
    count = len(samples)
    out_count = max(1, round(count * target_rate / source_rate))
    step = source_rate / target_rate
    out = array("h", bytes(2 * out_count))
    last = count - 1
    for i in range(out_count):
        position = i * step
        left = int(position)
        if left >= last:
            out[i] = samples[last]
            continue
        fraction = position - left
        out[i] = round(samples[left] + (samples[left + 1] - samples[left]) * fraction)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()
