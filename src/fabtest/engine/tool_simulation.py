"""A tool answered by an LLM: ``Given the tool "X" is simulated as "..."``.

When writing out every result is too much (a flight search over a whole schedule), the scenario
describes the tool and the simulator LLM plays it, call by call. The prompt shows the
description, this tool's earlier calls in the scenario with what it returned (so a booking made
in call 2 is found in call 5: stateful, like Strands' ToolSimulator), then this call's arguments,
and asks for the return value as JSON text or an error. The call goes through the configured
simulator LLM, so the LLM cache records and replays it like every other call, and its tokens are
charged to the simulator's usage.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from fabtest.agents.stubs import Answer
from fabtest.conversation import TokenUsage, ToolCall, jsonable
from fabtest.llm.base import LLM
from fabtest.llm.calls import LLMCall, llm_call

__all__ = ["TOOL_PROMPT", "TOOL_SYSTEM_PROMPT", "ToolSimulator"]

TOOL_SYSTEM_PROMPT = """\
You simulate a software tool so that an AI agent can be tested without the real system. You are \
the tool: not the agent, not the user. Return only what the tool returns. Answer with a single \
JSON object and nothing else."""

TOOL_PROMPT = """\
THE TOOL
{name}: {description}

ITS EARLIER CALLS IN THIS CONVERSATION (oldest first; stay consistent with them)
{earlier}

THIS CALL
arguments: {arguments}

Return what the tool returns for this call: realistic data that follows the description and the \
earlier calls. If, by the description, this call fails, put the tool's error message in "error" \
and null in "result".
JSON: {{"result": "<the tool's return value as JSON text>", "error": null}}"""


class SimulatedToolAnswer(BaseModel):
    """The simulator's answer: the return value as JSON text, or an error message."""

    result: str | None = None
    error: str | None = None


@dataclass
class ToolSimulator:
    """One scenario's LLM-played tool; its earlier calls are kept for the next prompt."""

    name: str
    description: str
    llm: LLM
    charge: Callable[[TokenUsage], None]
    earlier: list[ToolCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def build_prompt(self, arguments: Mapping[str, Any]) -> str:
        with self._lock:
            earlier = list(self.earlier)
        shown = "\n".join(f"{i}. arguments: {_json(c.arguments)} -> "
                          + (f"error: {c.result}" if c.metadata.get("error") else f"result: {_json(c.result)}")
                          for i, c in enumerate(earlier, start=1)) or "(none: this is its first call)"
        return TOOL_PROMPT.format(name=self.name, description=self.description, earlier=shown,
                                  arguments=_json(dict(arguments)))

    def answer(self, arguments: Mapping[str, Any]) -> Answer:
        prompt = self.build_prompt(arguments)
        with self._lock:
            earlier = tuple(self.earlier)
        call = LLMCall("tool", subject=_json(dict(arguments)), tool=self.name, arguments=dict(arguments),
                       tool_calls=earlier, source=self.description)
        with llm_call(call):
            completion = self.llm.complete_json(prompt, SimulatedToolAnswer, system=TOOL_SYSTEM_PROMPT)
        self.charge(completion.usage)
        parsed = completion.parsed or SimulatedToolAnswer(
            error=f"the simulator gave no answer: {completion.text[:200]!r}")
        if parsed.error:
            found = Answer(parsed.error, True, 0.0)
        else:
            found = Answer(_value(parsed.result), False, 0.0)
        with self._lock:
            self.earlier.append(ToolCall(self.name, jsonable(dict(arguments)), jsonable(found.result),
                                         {"error": True} if found.is_error else {}))
        return found


def _json(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, sort_keys=True)


def _value(text: str | None) -> Any:
    """The return value the simulator wrote as JSON text (text that is not JSON stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
