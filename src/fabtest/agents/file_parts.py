"""Files on the wire: an :class:`~fabtest.conversation.Attachment` in each protocol's own shape, and back.

Every adapter maps a message's files to its protocol's native parts (OpenAI chat content parts,
base64 fields in an HTTP body, Gemini inline data, ...) and reads the files of a reply where the
protocol has them. The shapes shared by several adapters live here, so one mapping serves them
all; each is the protocol's documented form (OpenAI: ``image_url`` with a ``data:`` URI for an
image, ``file`` with ``file_data`` for anything else). Base64 is computed once per content
(memoised on the bytes), not once per turn that resends the history.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from fabtest.conversation import Attachment, Message, guess_mime_type
from fabtest.errors import UsageError
from fabtest.llm.inline_files import b64, data_uri
from fabtest.llm.inline_files import openai_content as chat_content

__all__ = ["FILELESS", "b64", "data_uri", "from_base64", "from_data_uri", "langchain_content", "langchain_files",
           "openai_content", "openai_reply_files", "refuse_files", "responses_content"]

#: the adapters whose protocol carries no file, as fabtest drives it: a scenario that sends one is refused
FILELESS = {"acp": "an ACP agent (fabtest's ACP client sends text prompts only)"}


def from_base64(text: str, *, name: str, mime_type: str | None, where: str) -> Attachment:
    """An attachment from base64 text; bad base64 is an error naming ``where``."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        from fabtest.agents.base import AgentError

        raise AgentError(f"{where}: the file {name!r} is not valid base64") from None
    return Attachment.from_bytes(data, name=name, mime_type=mime_type or guess_mime_type(name))


def from_data_uri(uri: str, *, name: str, where: str) -> Attachment | None:
    """``data:image/png;base64,...`` as an attachment (None for a URL that is not a base64 data URI)."""
    if not uri.startswith("data:") or ";base64," not in uri:
        return None
    head, _, payload = uri.partition(";base64,")
    mime_type = head[len("data:"):] or None
    return from_base64(payload, name=name, mime_type=mime_type, where=where)


def openai_content(message: Message) -> str | list[dict[str, Any]]:
    """A chat-completions ``content``: the text alone, or content parts when files go with it."""
    return chat_content(message.content, message.attachments)  # the text, then each file


def openai_reply_files(content: Any, *, where: str) -> tuple[str, list[Attachment]]:
    """A chat-completions reply's ``content`` as text and files: a string, or a list of content
    parts (``text``, ``image_url`` with a data URI, ``file`` with ``file_data``)."""
    if not isinstance(content, list):
        return (content or "") if isinstance(content, str) else "", []
    texts: list[str] = []
    files: list[Attachment] = []
    for i, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            from fabtest.agents.base import AgentError

            raise AgentError(f"{where}: content[{i}] is {type(part).__name__}, expected a content part like "
                             '{"type": "text", "text": "..."}')
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url" and isinstance(part.get("image_url"), Mapping):
            url = str(part["image_url"].get("url", ""))
            file = from_data_uri(url, name=f"image-{i + 1}", where=where)
            if file is not None:
                ext = _extension(file.mime_type)
                files.append(Attachment(f"image-{i + 1}{ext}", file.mime_type, file.data, file.sha256))
        elif kind == "file" and isinstance(part.get("file"), Mapping):
            raw = part["file"]
            name = str(raw.get("filename") or f"file-{i + 1}")
            file = from_data_uri(str(raw.get("file_data", "")), name=name, where=where)
            if file is not None:
                files.append(file)
    return "\n".join(texts), files


def responses_content(message: Message) -> str | list[dict[str, Any]]:
    """An OpenAI Responses-API input ``content`` (the OpenAI Agents SDK's input items): the text, or
    ``input_text`` with ``input_image`` (a data URI) and ``input_file`` (``file_data``) parts."""
    if not message.attachments:
        return message.content
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": message.content}]
    for file in message.attachments:
        if file.is_image:
            parts.append({"type": "input_image", "image_url": data_uri(file), "detail": "auto"})
        else:
            parts.append({"type": "input_file", "filename": file.name, "file_data": data_uri(file)})
    return parts


def langchain_content(message: Message) -> str | list[dict[str, Any]]:
    """A LangChain message ``content``: the text, or standard content blocks (``text``, then
    ``image`` / ``file`` blocks with ``base64`` and ``mime_type``; a file's name in ``extras``)."""
    if not message.attachments:
        return message.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
    for file in message.attachments:
        block: dict[str, Any] = {"type": "image" if file.is_image else "file", "base64": b64(file.data),
                                 "mime_type": file.mime_type}
        if not file.is_image:
            block["extras"] = {"filename": file.name}
        blocks.append(block)
    return blocks


def langchain_files(blocks: Any, *, where: str) -> list[Attachment]:
    """The ``image`` / ``file`` content blocks with inline ``base64`` of a LangChain reply, as files."""
    files: list[Attachment] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, Mapping) or block.get("type") not in ("image", "file") or not block.get("base64"):
            continue
        mime_type = str(block.get("mime_type") or "")
        extras = block.get("extras")
        extras = extras if isinstance(extras, Mapping) else {}
        name = str(extras.get("filename") or f"{block['type']}-{len(files) + 1}{_extension(mime_type)}")
        files.append(from_base64(str(block["base64"]), name=name, mime_type=mime_type or None, where=where))
    return files


def _extension(mime_type: str) -> str:
    import mimetypes

    return mimetypes.guess_extension(mime_type) or ""


def refuse_files(adapter: str, messages: Any) -> None:
    """A UsageError naming the adapter when a message carries a file its protocol cannot."""
    if any(m.attachments for m in messages):
        raise UsageError(f"{FILELESS.get(adapter, adapter)} cannot be sent files; send text to it, or test the "
                         "file handling through an adapter that carries files (docs/how-to/files.md)")
