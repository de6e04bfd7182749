"""A small A2A agent built with the protocol's own SDK (a2a-sdk's server: AgentExecutor, TaskUpdater,
the JSON-RPC and agent-card routes), scripted by what the user says:

- ``hello``: a direct message reply, counting the messages it has had in this context;
- ``weather in CITY``: a task that calls ``get_weather`` (data parts in ADK's convention), then an
  artifact ``forecast`` with the text and a PNG, sent as a stream of chunks;
- ``refund N``: ``input-required`` with a long-running ``refund`` call (ADK's approval shape); the next
  message in that task approves or rejects it (a ``function_response`` data part, else its text);
- ``book``: ``input-required`` asking "Which date?"; the next message's text is the answer;
- ``fail``: a failed task with its reason; ``login``: a task that needs authentication.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from a2a.helpers import new_data_part, new_message, new_raw_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from starlette.applications import Starlette

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


def _tool_part(kind: str, data: dict[str, Any], **extra: Any) -> Part:
    part = new_data_part(data)
    meta = Struct()
    meta.update({"adk_type": kind, **extra})
    part.metadata.CopyFrom(meta)
    return part


class WeatherExecutor(AgentExecutor):
    def __init__(self) -> None:
        self.turns: Counter[str] = Counter()
        self.received: list[Any] = []  # every user message, for tests to look at
        self.decisions: list[list[dict[str, Any]]] = []  # the function_response parts each resume carried

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.received.append(context.message)
        text = context.get_user_input().strip()
        self.turns[context.context_id or ""] += 1
        if context.current_task is not None:  # the user answers a task that waits for input
            await self._resume(context, event_queue, text)
            return
        if text.startswith("hello"):
            files = [p.filename for p in context.message.parts if p.WhichOneof("content") == "raw"]
            note = f" and got {', '.join(files)}" if files else ""
            await event_queue.enqueue_event(new_message(
                [new_text_part(f"Hello! Message {self.turns[context.context_id or '']} in this context{note}.")],
                context_id=context.context_id))
            return
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        weather = re.match(r"weather in (\w+)", text)
        if weather:
            city = weather.group(1)
            await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message(
                [_tool_part("function_call", {"id": "c1", "name": "get_weather", "args": {"city": city}})]))
            await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message(
                [_tool_part("function_response", {"id": "c1", "name": "get_weather",
                                                  "response": {"sky": "sunny", "celsius": 21}})]))
            await updater.add_artifact([new_text_part(f"Sunny in {city}, ")], artifact_id="f", name="forecast")
            await updater.add_artifact([new_text_part("21 degrees.")], artifact_id="f", append=True)
            await updater.add_artifact([new_raw_part(PNG, media_type="image/png", filename="sky.png")],
                                       artifact_id="f", append=True, last_chunk=True)
            await updater.complete()
        elif text.startswith("refund"):
            amount = int(text.split()[1])
            await updater.requires_input(updater.new_agent_message([
                new_text_part(f"Refund {amount} euros: do you approve?"),
                _tool_part("function_call", {"id": "r1", "name": "refund", "args": {"amount": amount}},
                           adk_is_long_running=True)]))
        elif text == "book":
            await updater.requires_input(updater.new_agent_message([new_text_part("Which date?")]))
        elif text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("the weather service is down")]))
        elif text == "login":
            await updater.requires_auth(updater.new_agent_message([new_text_part("sign in at /login")]))
        else:
            await updater.complete(updater.new_agent_message([new_text_part(f"You said: {text}")]))

    async def _resume(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        task = context.current_task
        assert task is not None
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.message.parts[0].text == "Which date?":
            await updater.complete(updater.new_agent_message([new_text_part(f"Booked for {text}.")]))
            return
        decisions = [MessageToDict(p)["data"]["response"] for p in context.message.parts
                     if p.WhichOneof("content") == "data" and p.metadata["adk_type"] == "function_response"]
        self.decisions.append(decisions)
        approved = decisions[0]["approved"] if decisions else text.lower().startswith(("yes", "approve"))
        await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message(
            [_tool_part("function_response", {"id": "r1", "name": "refund",
                                              "response": {"status": "approved" if approved else "rejected"}})]))
        reply = "The refund is issued." if approved else f"No refund, as you said: {text}"
        await updater.add_artifact([new_text_part(reply)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def card(url: str, *, streaming: bool = True) -> AgentCard:
    return AgentCard(
        name="Weather agent", description="Tells the weather and issues refunds", version="1.2.0",
        supported_interfaces=[AgentInterface(url=url + "/", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain", "image/png"], default_output_modes=["text/plain", "image/png"],
        skills=[AgentSkill(id="weather", name="Weather", description="Weather by city", tags=["weather"])])


def app(url: str, executor: WeatherExecutor, *, streaming: bool = True) -> Starlette:
    """The agent at ``url``: its card at the well-known path, JSON-RPC at ``/``."""
    agent_card = card(url, streaming=streaming)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=agent_card)
    return Starlette(routes=[*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, "/")])
