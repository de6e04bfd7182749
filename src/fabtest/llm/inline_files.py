"""Files next to the text that names them, in a judge or simulator call.

A prompt that quotes a conversation with files names each file on a line of its own, ending
with ``[attached: file N]`` (:mod:`fabtest.engine.transcript`). The provider sends the prompt
as parts: the text up to that line, the file itself (Gemini ``inline_data``, an OpenAI
``image_url`` / ``file`` part), then the rest of the text. Evidence sits beside the transcript
line it belongs to, labelled (interleaved text and images, each next to the text that refers to
it: a common recommendation for prompts with several images), rather than in a pile at the end
where the judge would have to match names to files.

The files travel with the call's tag (:class:`fabtest.llm.calls.LLMCall` ``files``), so the
:class:`~fabtest.llm.base.LLM` protocol is unchanged and an LLM that ignores them still gets the
whole text. A file no line names is put after the text.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Sequence
from typing import Any

from fabtest.conversation import Attachment

__all__ = ["ATTACHED", "b64", "call_files", "data_uri", "gemini_contents", "interleave", "marker", "openai_content"]

#: how a transcript line says "the file itself follows this line"
ATTACHED = "[attached: file {n}]"


def marker(n: int) -> str:
    return ATTACHED.format(n=n)


def interleave(prompt: str, files: Sequence[Attachment]) -> list[str | Attachment]:
    """``prompt`` cut after each file's marker, with the file right after it (text first, in order)."""
    pieces: list[str | Attachment] = []
    rest = prompt
    unplaced: list[Attachment] = []
    for n, file in enumerate(files, start=1):
        # at a line's end only: inside a quoted reply the marker is followed by the closing quote
        at = rest.find(marker(n) + "\n")
        if at < 0 and rest.endswith(marker(n)):
            at = len(rest) - len(marker(n))
        if at < 0:
            unplaced.append(file)
            continue
        end = min(at + len(marker(n)) + 1, len(rest))
        pieces += [rest[:end], file]
        rest = rest[end:]
    if rest:
        pieces.append(rest)
    return [*pieces, *unplaced]


@functools.lru_cache(maxsize=32)
def b64(data: bytes) -> str:
    """The base64 text of ``data``, memoised: a file resent with every turn or judge call is encoded once."""
    return base64.b64encode(data).decode("ascii")


def data_uri(file: Attachment) -> str:
    return f"data:{file.mime_type};base64,{b64(file.data)}"


def call_files() -> tuple[Attachment, ...]:
    """The files of the LLM call being made (its tag's), or none."""
    from fabtest.llm.calls import current_call

    call = current_call()
    return call.files if call is not None else ()


def call_seed() -> int | None:
    """The sampling seed of the LLM call being made (a simulated user's), or None."""
    from fabtest.llm.calls import current_call

    call = current_call()
    return call.seed if call is not None else None


def gemini_contents(prompt: str, files: Sequence[Attachment]) -> Any:
    """The prompt as google-genai contents: the text alone, or one user turn of text and inline parts."""
    if not files:
        return prompt
    from google.genai import types

    parts = [types.Part(text=piece) if isinstance(piece, str) else
             types.Part.from_bytes(data=piece.data, mime_type=piece.mime_type) for piece in interleave(prompt, files)]
    return [types.Content(role="user", parts=parts)]


def openai_content(prompt: str, files: Sequence[Attachment]) -> str | list[dict[str, Any]]:
    """The prompt as a chat-completions ``content``: the text alone, or text, ``image_url`` and ``file`` parts."""
    if not files:
        return prompt
    parts: list[dict[str, Any]] = []
    for piece in interleave(prompt, files):
        if isinstance(piece, str):
            parts.append({"type": "text", "text": piece})
        elif piece.is_image:
            parts.append({"type": "image_url", "image_url": {"url": data_uri(piece)}})
        else:
            parts.append({"type": "file", "file": {"filename": piece.name, "file_data": data_uri(piece)}})
    return parts
