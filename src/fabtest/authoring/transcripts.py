"""Recorded conversations in the formats teams already have, read into fabtest's plain turns.

``fabtest import`` turns a real conversation (a production incident, a log, a run of fabtest
itself) into a feature. Each format is read by one function into :class:`RecordedConversation`:

* ``fabtest``: an experiment file; one run of one scenario (``--scenario``, ``--run``);
* ``openai``: OpenAI chat messages (``[{role, content, tool_calls}]`` or ``{"messages": [...]}``),
  tool results from the ``tool`` messages that answer each call id;
* ``gemini``: Gemini ``contents`` (``[{role: user|model, parts: [...]}]`` or ``{"contents": [...]}``),
  ``functionCall`` parts as tool calls and ``functionResponse`` parts as their results;
* ``messages``: a plain list of ``{role: user|agent|assistant, content, tool_calls: [{name, arguments, result}]}``;
* ``openai-agents``, ``langchain``, ``adk``: the histories the frameworks save
  (:mod:`fabtest.authoring.framework_transcripts`);
* ``otlp``: OpenTelemetry traces exported as OTLP JSON (``{"resourceSpans": [...]}``): the chat span
  that saw the longest history (``gen_ai.input.messages`` and ``gen_ai.output.messages``, the GenAI
  semantic conventions' ``parts`` with ``text``, ``tool_call`` and ``tool_call_response``).

A turn starts at each user message; everything the agent said and called until the next user
message is that turn's reply. System messages are left out (a feature does not set the agent's
instructions); agent messages before the first user message are counted in ``skipped``.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabtest.agents.file_parts import from_base64, openai_reply_files
from fabtest.authoring.framework_transcripts import FRAMEWORK_FORMATS, detect_framework, read_framework
from fabtest.authoring.recorded import (
    RecordedConversation,
    RecordedTurn,
    Turns,
    message_text,
    tool_arguments,
    tool_result,
)
from fabtest.conversation import Attachment, Pause, ToolCall
from fabtest.errors import UsageError
from fabtest.experiment.model import PauseRecord

# this module's own names for the shared helpers (authoring/recorded.py)
_Turns, _text, _arguments = Turns, message_text, tool_arguments

__all__ = ["FORMATS", "RecordedConversation", "RecordedTurn", "read_conversation", "tool_result"]

FORMATS = ("fabtest", "openai", "gemini", "messages", "otlp", *FRAMEWORK_FORMATS)


def read_conversation(path: Path, *, fmt: str | None = None, scenario: str | None = None,
                      run: int | None = None) -> RecordedConversation:
    """Read ``path`` in ``fmt`` (detected from its shape when None)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not JSON ({exc}); expected a recorded conversation "
                         f"in one of the formats {', '.join(FORMATS)}") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a recorded conversation") from None
    fmt = fmt or _detect(data, path)
    try:
        return _read(data, fmt, path, scenario, run)
    except (AttributeError, TypeError, KeyError, ValueError, RecursionError) as exc:
        # a value of another shape than the format's (a string where a list of objects belongs) that the
        # readers below do not name themselves: one line, never a traceback
        what = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{path}: not a valid recording in the {fmt!r} format ({what})") from None


def _read(data: Any, fmt: str, path: Path, scenario: str | None, run: int | None) -> RecordedConversation:
    if fmt == "fabtest":
        return _from_experiment(data, path, scenario, run)
    if fmt == "otlp":
        conversation = _from_otlp(data, path)
        if not conversation.turns:
            raise UsageError(f"{path}: no chat span with user messages (gen_ai.input.messages) in these traces")
        return conversation
    if fmt in FRAMEWORK_FORMATS:
        conversation = read_framework(fmt, _message_list(data, "events" if fmt == "adk" else "messages", path), path)
        if not conversation.turns:
            raise UsageError(f"{path}: no user message in it; nothing to replay")
        return conversation
    messages = _message_list(data, "contents" if fmt == "gemini" else "messages", path)
    reader = {"openai": _from_openai, "gemini": _from_gemini, "messages": _from_plain}[fmt]
    conversation = reader(messages, path)
    if not conversation.turns:
        raise UsageError(f"{path}: no user message in it; nothing to replay")
    return conversation


def _detect(data: Any, path: Path) -> str:
    if isinstance(data, Mapping):
        if "scenario_results" in data or "scenario_index" in data:
            return "fabtest"
        if "resourceSpans" in data:
            return "otlp"
        if "contents" in data:
            return "gemini"
        if isinstance(data.get("events"), list):  # an ADK session, dumped
            data = data["events"]
        elif "messages" in data:
            data = data["messages"]
    if isinstance(data, list) and data and all(isinstance(m, Mapping) for m in data):
        framework = detect_framework(data)
        if framework is not None:
            return framework
        if any("parts" in m for m in data):
            return "gemini"
        if any(m.get("role") in ("assistant", "tool", "system") or "tool_call_id" in m for m in data):
            return "openai"
        return "messages"
    raise UsageError(f"{path}: not a recorded conversation: expected a fabtest experiment, a list of chat "
                     f"messages, or an object with 'messages' or 'contents' (formats: {', '.join(FORMATS)})")


def _message_list(data: Any, key: str, path: Path) -> list[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        data = data.get(key)
    if not isinstance(data, list) or not all(isinstance(m, Mapping) for m in data):
        raise UsageError(f"{path}: expected a list of messages (objects) under '{key}' or at the top")
    return data


def _objects(value: Any, key: str, path: Path) -> list[Mapping[str, Any]]:
    """The objects of a list the format puts under ``key`` (none when it is absent); a value of
    another kind is one line naming the key, not an AttributeError."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{path}: '{key}' is {type(value).__name__} {_short(value)}, expected a list of objects")
    return [item for item in value if isinstance(item, Mapping)]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _from_openai(messages: list[Mapping[str, Any]], path: Path) -> RecordedConversation:
    turns, by_id = _Turns(), dict[Any, ToolCall]()
    for m in messages:
        role = m.get("role")
        if role == "user":
            turns.user(_text(m.get("content")), openai_reply_files(m.get("content"), where=str(path))[1])
        elif role == "assistant":
            calls = []
            for raw in _objects(m.get("tool_calls"), "tool_calls", path):
                fn = raw["function"] if isinstance(raw.get("function"), Mapping) else {}
                call = ToolCall(str(fn.get("name", "")), _arguments(fn.get("arguments"), path))
                by_id[raw.get("id")] = call
                calls.append(call)
            turns.agent(_text(m.get("content")), calls)
        elif role == "tool" and (answered := by_id.get(m.get("tool_call_id"))) is not None:
            answered.result = tool_result(_text(m.get("content")))
        else:
            turns.skipped += 1
    return RecordedConversation(path.stem, "openai", turns.turns, skipped=turns.skipped)


def _from_gemini(contents: list[Mapping[str, Any]], path: Path) -> RecordedConversation:
    turns, pending = _Turns(), dict[Any, ToolCall]()
    for c in contents:
        parts = [p for p in c.get("parts") or [] if isinstance(p, Mapping)]
        responses = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), Mapping)]
        for response in responses:  # sent with role "user" (or "function"): results, not user lines
            if (answered := pending.get(response.get("name"))) is not None:
                answered.result = response.get("response")
        text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
        if c.get("role") == "model":
            calls = [ToolCall(str(p["functionCall"].get("name", "")), _arguments(p["functionCall"].get("args"), path))
                     for p in parts if isinstance(p.get("functionCall"), Mapping)]
            pending.update({call.name: call for call in calls})
            turns.agent(text, calls)
        elif text or not responses:
            turns.user(text, _gemini_files(parts, path))
    return RecordedConversation(path.stem, "gemini", turns.turns, skipped=turns.skipped)


def _gemini_files(parts: list[Mapping[str, Any]], path: Path) -> list[Attachment]:
    """A Gemini message's ``inlineData`` parts (``inline_data`` too) as files, named by type and order."""
    files: list[Attachment] = []
    for part in parts:
        blob = part.get("inlineData") or part.get("inline_data")
        if isinstance(blob, Mapping) and isinstance(blob.get("data"), str):
            mime_type = str(blob.get("mimeType") or blob.get("mime_type") or "application/octet-stream")
            name = str(blob.get("displayName") or f"file-{len(files) + 1}{mimetypes.guess_extension(mime_type) or ''}")
            files.append(from_base64(blob["data"], name=name, mime_type=mime_type, where=str(path)))
    return files


def _from_plain(messages: list[Mapping[str, Any]], path: Path) -> RecordedConversation:
    turns = _Turns()
    for m in messages:
        if m.get("role") == "user":
            turns.user(_text(m.get("content")))
        elif m.get("role") in ("agent", "assistant"):
            calls = [ToolCall(str(c.get("name", "")), _arguments(c.get("arguments"), path), c.get("result"))
                     for c in _objects(m.get("tool_calls"), "tool_calls", path)]
            turns.agent(_text(m.get("content")), calls)
        else:
            turns.skipped += 1
    return RecordedConversation(path.stem, "messages", turns.turns, skipped=turns.skipped)


def _from_experiment(doc: Mapping[str, Any], path: Path, scenario: str | None, run: int | None) -> RecordedConversation:
    entries = [e for e in doc.get("scenario_results") or [] if isinstance(e, Mapping) and e.get("transcript")]
    if scenario:
        entries = [e for e in entries if scenario in (e.get("name"), e.get("id"))]
    if run is not None:
        entries = [e for e in entries if e.get("iteration") == run]
    if not entries:
        names = sorted({str(e.get("name")) for e in doc.get("scenario_results") or [] if isinstance(e, Mapping)})
        wanted = f" for scenario {scenario!r}" + (f" run {run}" if run is not None else "") if scenario else ""
        raise UsageError(f"{path}: no recorded conversation{wanted}; scenarios: {', '.join(names[:10]) or 'none'}")
    if len({e.get("id") for e in entries}) > 1:
        names = sorted({str(e.get("name")) for e in entries})
        raise UsageError(f"{path}: holds {len(names)} scenarios; pick one with --scenario NAME: "
                         f"{', '.join(names[:10])}")
    entry = next((e for e in entries if e.get("passed") is False), entries[0])  # a failed run first: the one to keep
    turns = [RecordedTurn(str(t.get("user", "")), str(t.get("agent", "")),
                          [ToolCall(str(c.get("name", "")), dict(c.get("arguments") or {}), c.get("result"),
                                    {**(c.get("metadata") or {}), **({"stubbed": True} if c.get("stubbed") else {})})
                           for c in t.get("tool_calls") or []])
             for t in entry["transcript"]]
    _pauses(entry["transcript"], turns)
    experiment = (doc.get("experiment") or {}).get("id") or path.stem
    origin = f"experiment {experiment}, run {entry.get('iteration', 1)} of {entry.get('name')!r}" + (
        f" (failed: {entry.get('failure_message')})" if entry.get("passed") is False and entry.get("failure_message")
        else "")
    return RecordedConversation(str(entry.get("name") or path.stem), "fabtest", turns, origin=origin)


def _pauses(transcript: list[Mapping[str, Any]], turns: list[RecordedTurn]) -> None:
    """Each recorded pause on the turn that asked it, and its decision on the turn that carried it
    (a pause record that does not read as one is left out, as a turn's other parts are)."""
    for turn, recorded in zip(turns, transcript, strict=True):
        for raw in recorded.get("pauses") or []:
            try:
                record = PauseRecord.model_validate(raw)
                pause = Pause(record.tool, dict(record.arguments), record.question, record.id, record.kind)
            except (ValidationError, ValueError):
                continue
            turn.pauses.append(pause)
            decision, number = record.as_decision(), record.decided_in_turn
            if decision is not None and number is not None and 1 <= number <= len(turns):
                turns[number - 1].decisions.append(decision)


def _attribute(value: Mapping[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as plain data."""
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_attribute(v) for v in value["arrayValue"].get("values") or []]
    return None


def _spans(data: Mapping[str, Any], path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """Every span's end time and attributes."""
    for resource in _objects(data.get("resourceSpans"), "resourceSpans", path):
        for scope in _objects(resource.get("scopeSpans"), "scopeSpans", path):
            for span in _objects(scope.get("spans"), "spans", path):
                attributes = {str(a.get("key")): _attribute(a.get("value") or {})
                              for a in _objects(span.get("attributes"), "attributes", path)}
                yield int(span.get("endTimeUnixNano") or 0), attributes


def _json_attribute(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


def _from_otlp(data: Mapping[str, Any], path: Path) -> RecordedConversation:
    """The chat span with the longest input history: its input messages and its output, in order."""
    best: tuple[int, int, list[Any]] | None = None
    for end, attributes in _spans(data, path):
        history = _json_attribute(attributes.get("gen_ai.input.messages"))
        if not history:
            continue
        messages = history + _json_attribute(attributes.get("gen_ai.output.messages"))
        if best is None or (len(history), end) > best[:2]:
            best = (len(history), end, messages)
    turns, by_id = _Turns(), dict[Any, ToolCall]()
    for message in best[2] if best else []:
        if not isinstance(message, Mapping):
            continue
        parts = [p for p in message.get("parts") or [] if isinstance(p, Mapping)]
        text = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
        role = message.get("role")
        if role == "user":
            turns.user(text)
        elif role == "assistant":
            calls = []
            for part in parts:
                if part.get("type") == "tool_call":
                    call = ToolCall(str(part.get("name", "")), _arguments(part.get("arguments"), path))
                    by_id[part.get("id")] = call
                    calls.append(call)
            turns.agent(text, calls)
        elif role == "tool":
            for part in parts:
                if part.get("type") == "tool_call_response" and (answered := by_id.get(part.get("id"))) is not None:
                    answered.result = tool_result(part.get("response", part.get("result")))
        else:
            turns.skipped += 1
    return RecordedConversation(path.stem, "otlp", turns.turns, skipped=turns.skipped)
