"""An OpenAI Agents SDK agent under test: ``[tool.fabtest.agents.NAME] openai_agents = "module:agent"``.

Each user message is one ``await Runner.run(agent, text, session=...)`` on an in-memory
``SQLiteSession`` of the scenario's own (a fresh session per scenario), so earlier turns, tool
calls included, are in the model's input. The run's items become the turn: a ``ToolCallItem`` a
tool call with its arguments, the ``ToolCallOutputItem`` of the same ``call_id`` its result; the
run's usage gives the tokens and the agent's model (or the response's) the model for cost.
Handoffs are followed by the SDK; the reply is the run's final output.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, Runner, SQLiteSession
from agents.items import ToolCallItem, ToolCallOutputItem

from fabtest.agents import openai_agents_pauses
from fabtest.agents.base import OnToolCall
from fabtest.agents.file_parts import responses_content
from fabtest.agents.frameworks import (
    Session,
    ToolLog,
    known_tools,
    model_name,
    output_text,
    resolve_target,
    turn_response,
)
from fabtest.conversation import AgentResponse, Message, TokenUsage

__all__ = ["OpenAIAgentsAgent"]


class OpenAIAgentsAgent:
    """One scenario's session with an OpenAI Agents SDK agent; see the module docstring."""

    declared_tools: list[str] | None = None  # the table's tools = [...], which wins over the agent's

    def __init__(self, agent: Agent[Any], *, model: str | None = None) -> None:
        self.agent = agent
        self._model = model
        self._session = Session("openai-agents")
        self._sdk_session = SQLiteSession(str(uuid.uuid4()))
        self._waiting: openai_agents_pauses.Waiting | None = None  # a run stopped for approval
        self._recorded: set[str] = set()  # call ids already recorded on a turn (a resumed run repeats them)

    @classmethod
    def from_target(cls, target: Any, context: Mapping[str, Any], *, where: str,
                    model: str | None = None) -> OpenAIAgentsAgent:
        return cls(resolve_target(target, Agent, context, where=where, what="an agents.Agent"), model=model)

    def metadata(self) -> dict[str, Any]:
        """Totals, the session, and ``tools``: the function tools of the agent and of the agents it hands
        off to (a step naming another is a typo)."""
        tools = self.declared_tools if self.declared_tools is not None else known_tools(_tool_names(self.agent, set()))
        return self._session.metadata(agent=self.agent.name, model=self._model or model_name(self.agent.model),
                                      session_id=self._sdk_session.session_id, tools=tools)

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        text = self._session.new_user_text(messages)
        waiting, self._waiting = self._waiting, None
        if messages[-1].decisions and waiting is not None and self._session.continues(messages):
            rejected = waiting.decide(messages[-1].decisions)
            result = await Runner.run(self.agent, waiting.state, session=self._sdk_session)
            return self._answer(messages, result, on_tool_call, skip=rejected)
        if not self._session.continues(messages):
            self._sdk_session = SQLiteSession(str(uuid.uuid4()))
            # an assistant's earlier files are not resent: the API takes none from the assistant
            items: list[Any] = [{"role": "user", "content": responses_content(m)} if m.role == "user"
                                else {"role": "assistant", "content": m.content} for m in messages[:-1]]
            await self._sdk_session.add_items(items)
        asked: Any = text
        if messages[-1].attachments:  # input_image / input_file parts beside the text
            asked = [{"role": "user", "content": responses_content(messages[-1])}]
        result = await Runner.run(self.agent, asked, session=self._sdk_session)
        return self._answer(messages, result, on_tool_call)

    def _answer(self, messages: Sequence[Message], result: Any, on_tool_call: OnToolCall | None, *,
                skip: Collection[str] = ()) -> AgentResponse:
        """The run's items as the turn; a run stopped for approval waits with its state, its held
        calls recorded by the turn that resumes it (``skip``: the rejected ones, never made)."""
        interruptions = list(getattr(result, "interruptions", None) or [])
        pauses = openai_agents_pauses.pauses_of(interruptions)
        held = {p.id for p in pauses} | set(skip)
        log = ToolLog(on_tool_call)
        for item in result.new_items:
            raw: Any = item.raw_item
            call_id = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
            if call_id is not None and (call_id in held or call_id in self._recorded):
                continue
            if isinstance(item, ToolCallItem):
                name = str(getattr(raw, "name", None) or getattr(raw, "type", "tool"))  # a hosted tool has no name
                log.called(call_id, name, getattr(raw, "arguments", None))
            elif isinstance(item, ToolCallOutputItem):
                log.returned(call_id, item.output)
                if call_id is not None:
                    self._recorded.add(call_id)
        if interruptions:
            self._waiting = openai_agents_pauses.Waiting(result.to_state(), interruptions, pauses)
        used = result.context_wrapper.usage
        usage = TokenUsage(calls=used.requests, input_tokens=used.input_tokens, output_tokens=used.output_tokens)
        model = self._model or model_name(result.last_agent.model) or _response_model(result.new_items)
        response = turn_response(output_text(result.final_output), log, usage, model,
                                 agent=result.last_agent.name)
        response.pauses = pauses
        return self._session.answered(messages, response)


def _response_model(items: Sequence[Any]) -> str | None:
    """The model the Responses/Chat Completions call reported (an agent left on the SDK's default)."""
    for item in reversed(items):
        data = getattr(item.raw_item, "provider_data", None)
        if isinstance(data, Mapping) and isinstance(data.get("model"), str):
            return str(data["model"])
    return None


def _tool_names(agent: Agent[Any], seen: set[int]) -> Iterator[str | None]:
    """The function tools of ``agent`` and of every agent it can hand off to (a run follows handoffs);
    None for what cannot be named before a run: a hosted tool (its calls carry the call's type, not
    the tool's name), an MCP server, a ``Handoff`` object (its agent is known only when invoked)."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    for tool in agent.tools:
        yield tool.name if isinstance(tool, FunctionTool) else None
    if agent.mcp_servers:
        yield None
    for target in agent.handoffs:
        if isinstance(target, Agent):
            yield from _tool_names(target, seen)
        else:
            yield None
