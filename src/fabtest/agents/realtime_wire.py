"""The OpenAI Realtime event protocol as fabtest's Realtime agent speaks it: event names, session settings, items.

Two spellings of the protocol are in use: the beta (``OpenAI-Beta: realtime=v1``, and most servers
that copied it) names audio events ``response.audio.delta`` and takes flat session settings
(``input_audio_format = "pcm16"``); the GA protocol names them ``response.output_audio.delta`` and
nests them (``session.audio.input.format = {type: "audio/pcm", rate: 24000}``, ``session.type =
"realtime"``). The server's first event, ``session.created``, shows which one it speaks
(:func:`detect_api`), so nobody has to configure it; both names are read everywhere. Published
reference: the ``openai`` Python SDK's ``types/realtime`` (GA) and ``types/beta/realtime`` (beta).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fabtest.conversation import ToolCall, json_or_text

__all__ = ["AUDIO_DELTAS", "ITEM_EVENTS", "TEXT_DELTAS", "Api", "TurnCalls", "detect_api", "error_line",
           "output_format_problem", "session_update"]

Api = Literal["ga", "beta"]

AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
#: the model's words for its own audio (and a text-only reply's text), in both spellings
TEXT_DELTAS = frozenset({"response.output_audio_transcript.delta", "response.audio_transcript.delta",
                         "response.output_text.delta", "response.text.delta"})
#: events that carry a whole conversation item (a function call, its output)
ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done", "conversation.item.created",
                         "conversation.item.added", "conversation.item.done"})


def detect_api(session: Any) -> Api:
    """The spelling ``session.created``'s session shows: GA nests audio settings and says ``type = "realtime"``."""
    if isinstance(session, Mapping) and ("audio" in session or session.get("type") == "realtime"):
        return "ga"
    if isinstance(session, Mapping) and ("input_audio_format" in session or "modalities" in session):
        return "beta"
    return "ga"


def session_update(api: Api, *, instructions: str, voice: str, sample_rate: int) -> dict[str, Any]:
    """``session.update``: pcm16 both ways, no server turn detection (fabtest decides when the user's turn
    ends and commits it), the configured voice and instructions. The model goes in the URL (``?model=``),
    where the server reads it when the session is created."""
    if api == "beta":
        beta: dict[str, Any] = {"modalities": ["audio", "text"], "input_audio_format": "pcm16",
                                "output_audio_format": "pcm16", "turn_detection": None}
        beta.update({k: v for k, v in (("instructions", instructions), ("voice", voice)) if v})
        return {"type": "session.update", "session": beta}
    pcm = {"type": "audio/pcm", "rate": sample_rate}
    output: dict[str, Any] = {"format": pcm, **({"voice": voice} if voice else {})}
    ga: dict[str, Any] = {"type": "realtime", "output_modalities": ["audio"],
                          "audio": {"input": {"format": pcm, "turn_detection": None}, "output": output}}
    if instructions:
        ga["instructions"] = instructions
    return {"type": "session.update", "session": ga}


def output_format_problem(session: Any, sample_rate: int) -> str | None:
    """What is wrong with the audio format ``session.updated`` reports (None: pcm16 at ``sample_rate``)."""
    if not isinstance(session, Mapping):
        return None
    beta = session.get("output_audio_format")
    if beta is not None and beta != "pcm16":
        return f"the server answers in {beta!r}, fabtest reads pcm16"
    audio = session.get("audio")
    fmt = audio.get("output", {}).get("format") if isinstance(audio, Mapping) and isinstance(
        audio.get("output"), Mapping) else None
    if isinstance(fmt, Mapping):
        if fmt.get("type") not in (None, "audio/pcm"):
            return f"the server answers in {fmt.get('type')!r}, fabtest reads audio/pcm (pcm16)"
        if fmt.get("rate") not in (None, sample_rate):
            return f"the server answers at {fmt.get('rate')} Hz, the agent is configured for {sample_rate} Hz"
    return None


def error_line(event: Mapping[str, Any]) -> str:
    """An ``error`` event (or a failed response's ``status_details``) as one line: the server's message, its code."""
    error = event.get("error")
    if not isinstance(error, Mapping):
        error = event
    message = " ".join(str(error.get("message") or "no message").split())
    code = error.get("code") or error.get("type")
    return f"{message} ({code})" if code and code != "error" else message


@dataclass
class TurnCalls:
    """The function calls of one turn, put together from items and ``function_call_arguments.done``
    events (a call's name comes with its item, its final arguments with the done event), with the
    outputs a server that runs its own tools reports as ``function_call_output`` items."""

    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)

    def item(self, item: Any) -> None:
        if not isinstance(item, Mapping) or not item.get("call_id"):
            return
        if item.get("type") == "function_call":
            known = self.calls.setdefault(str(item["call_id"]), {})
            known.update({k: item[k] for k in ("name", "arguments") if item.get(k)})
        elif item.get("type") == "function_call_output":
            self.outputs[str(item["call_id"])] = item.get("output")

    def arguments_done(self, event: Mapping[str, Any]) -> None:
        if event.get("call_id"):
            self.item({"type": "function_call", **{k: event.get(k) for k in ("call_id", "name", "arguments")}})

    def unanswered(self) -> list[str]:
        """Names of calls no output was reported for (the server may still be running them)."""
        return [str(c.get("name", "?")) for cid, c in self.calls.items() if cid not in self.outputs]

    def tool_calls(self) -> list[ToolCall]:
        """Every call as fabtest records it: arguments parsed from JSON (kept as text when they are not)."""
        out = []
        for call_id, call in self.calls.items():
            raw = call.get("arguments") or "{}"
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                arguments = {"_raw": raw}
            if not isinstance(arguments, dict):
                arguments = {"_value": arguments}
            result = json_or_text(self.outputs[call_id]) if call_id in self.outputs else None
            out.append(ToolCall(name=str(call.get("name") or "?"), arguments=arguments, result=result,
                                metadata={"call_id": call_id}))
        return out
