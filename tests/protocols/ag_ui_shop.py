"""A small AG-UI agent built with the protocol's own SDK (ag-ui-protocol's event types and EventEncoder,
served by starlette), scripted by the last user message:

- ``hello``: text in two deltas, counting the user messages the thread has sent;
- ``weather in CITY``: a ``get_weather`` call (arguments in two deltas) with its result, the text, then
  a state snapshot and a JSON Patch delta;
- ``refund N``: a ``refund`` call, then RUN_FINISHED with an interrupt asking for approval; the next run's
  ``resume`` entry decides (a payload ``{"approved": true}`` issues it);
- ``fail``: RUN_ERROR; ``garbage``: an event that is not AG-UI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ag_ui.core import (
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route


class ShopAgent:
    def __init__(self) -> None:
        self.inputs: list[RunAgentInput] = []  # every run's input, for tests to look at

    def run(self, body: RunAgentInput) -> Iterator[Any]:
        self.inputs.append(body)
        yield RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id)
        last = body.messages[-1]  # on a resume, the assistant's message that made the interrupted call
        text = last.content if isinstance(last.content, str) else last.content[0].text if last.content else ""
        outcome = None
        if body.resume:
            (entry,) = body.resume
            approved = entry.status == "resolved" and (entry.payload or {}).get("approved") is True
            yield ToolCallResultEvent(message_id="m-r", tool_call_id="t-refund",
                                      content=json.dumps({"status": "issued" if approved else "rejected"}))
            yield from _say("The refund is issued." if approved else "No refund then.")
        elif text.startswith("hello"):
            users = sum(1 for m in body.messages if m.role == "user")
            files = [p.type for p in last.content[1:]] if not isinstance(last.content, str) else []
            yield TextMessageStartEvent(message_id="m1", role="assistant")
            yield TextMessageContentEvent(message_id="m1", delta="Hello! ")
            yield TextMessageContentEvent(message_id="m1", delta=f"{users} user message(s) in this thread"
                                          + (f", with {', '.join(files)}." if files else "."))
            yield TextMessageEndEvent(message_id="m1")
        elif match := re.match(r"weather in (\w+)", text):
            city = match.group(1)
            yield ToolCallStartEvent(tool_call_id="t1", tool_call_name="get_weather", parent_message_id="m2")
            yield ToolCallArgsEvent(tool_call_id="t1", delta='{"city": ')
            yield ToolCallArgsEvent(tool_call_id="t1", delta=json.dumps(city) + "}")
            yield ToolCallEndEvent(tool_call_id="t1")
            yield ToolCallResultEvent(message_id="m3", tool_call_id="t1", content='{"sky": "sunny", "celsius": 21}')
            yield from _say(f"Sunny in {city}.", "m2")
            yield StateSnapshotEvent(snapshot={"city": city, "searches": len(body.messages) // 2 + 1})
            yield StateDeltaEvent(delta=[{"op": "add", "path": "/units", "value": "celsius"}])
        elif text.startswith("refund"):
            amount = int(text.split()[1])
            yield ToolCallStartEvent(tool_call_id="t-refund", tool_call_name="refund")
            yield ToolCallArgsEvent(tool_call_id="t-refund", delta=json.dumps({"amount": amount}))
            yield ToolCallEndEvent(tool_call_id="t-refund")
            outcome = RunFinishedInterruptOutcome(interrupts=[Interrupt(
                id="i-refund", reason="tool_approval", tool_call_id="t-refund",
                message=f"Approve a refund of {amount} euros?")])
        elif text == "fail":
            yield RunErrorEvent(message="the model is overloaded", code="overloaded")
            return
        elif text == "garbage":
            yield {"type": "NOT_AN_EVENT"}
            return
        elif text == "cut":
            yield from _say("half a reply")
            return
        else:
            yield from _say(f"You said: {text}")
        yield RunFinishedEvent(thread_id=body.thread_id, run_id=body.run_id, outcome=outcome,
                               usage=[TokenUsage(model="shop-model", input_tokens=12, output_tokens=5)])


def _say(text: str, message_id: str = "m9") -> Iterator[Any]:
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    yield TextMessageContentEvent(message_id=message_id, delta=text)
    yield TextMessageEndEvent(message_id=message_id)


def app(agent: ShopAgent) -> Starlette:
    """The agent's run endpoint at ``/agent``, streaming its events as SSE."""
    encoder = EventEncoder()

    async def endpoint(request: Request) -> StreamingResponse:
        body = RunAgentInput.model_validate(await request.json())

        def stream() -> Iterator[str]:
            for event in agent.run(body):
                yield f"data: {json.dumps(event)}\n\n" if isinstance(event, dict) else encoder.encode(event)

        return StreamingResponse(stream(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])
