"""A PydanticAI agent under test: ``[tool.fabtest.agents.NAME] pydantic_ai = "module:agent"``.

Each user message is one ``await agent.run(text, message_history=...)``; the history is the
scenario's own (a fresh one per scenario), so tool calls and their returns stay in it across
turns. The turn's ``ToolCallPart``\\ s become tool calls with their arguments, the matching
``ToolReturnPart`` (or ``RetryPromptPart``, an error) their result; the run's usage gives the
turn's tokens and the responses' ``model_name`` the model its cost is priced with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic_ai import DeferredToolRequests
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.toolsets import FunctionToolset

from fabtest.agents import pydantic_ai_pauses
from fabtest.agents.base import OnToolCall
from fabtest.agents.frameworks import (
    Session,
    ToolLog,
    known_tools,
    model_name,
    output_text,
    resolve_target,
    turn_response,
)
from fabtest.conversation import AgentResponse, Attachment, Message, TokenUsage

__all__ = ["PydanticAIAgent"]


class PydanticAIAgent:
    """One scenario's conversation with a PydanticAI agent; see the module docstring."""

    declared_tools: list[str] | None = None  # the table's tools = [...], which wins over the agent's

    def __init__(self, agent: AbstractAgent[Any, Any], *, model: str | None = None) -> None:
        self.agent = agent
        self._model = model
        self._session = Session("pydantic-ai")
        self._history: list[ModelMessage] = []

    @classmethod
    def from_target(cls, target: Any, context: Mapping[str, Any], *, where: str,
                    model: str | None = None) -> PydanticAIAgent:
        return cls(resolve_target(target, AbstractAgent, context, where=where, what="a pydantic_ai.Agent"),
                   model=model)

    def metadata(self) -> dict[str, Any]:
        """Totals and ``tools``: the agent's function tools (a step naming another is a typo)."""
        tools = self.declared_tools if self.declared_tools is not None else known_tools(_tool_names(self.agent))
        return self._session.metadata(agent=getattr(self.agent, "name", None),
                                      model=self._model or model_name(getattr(self.agent, "model", None)),
                                      tools=tools)

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        text = self._session.new_user_text(messages)
        log = ToolLog(on_tool_call)
        skip: set[str] = set()
        if messages[-1].decisions and messages[-2].pauses and self._session.continues(messages):
            asked, decisions = messages[-2].pauses, messages[-1].decisions
            result = await self.agent.run(message_history=self._history,
                                          deferred_tool_results=pydantic_ai_pauses.results_for(asked, decisions))
            for call, skipped in pydantic_ai_pauses.held_calls(asked, decisions):
                if skipped:
                    skip.add(call.id)
                else:  # approved now, made in this run: recorded here, with its result below
                    log.called(call.id, call.tool or "tool", call.arguments)
        else:
            if not self._session.continues(messages):
                self._history = [_as_message(m) for m in messages[:-1]]
            prompt: Any = text
            if messages[-1].attachments:
                prompt = _user_content(messages[-1])
            result = await self.agent.run(prompt, message_history=self._history)
        self._history = list(result.all_messages())
        output = result.output
        pauses = pydantic_ai_pauses.pauses_of(output) if isinstance(output, DeferredToolRequests) else []
        skip |= {p.id for p in pauses}  # a deferred call is the pause, not a call made
        model = self._model
        for message in result.new_messages():
            for part in message.parts:
                if getattr(part, "tool_call_id", None) in skip:
                    continue
                if isinstance(part, ToolCallPart):
                    log.called(part.tool_call_id, part.tool_name, part.args_as_dict())
                elif isinstance(part, ToolReturnPart):
                    log.returned(part.tool_call_id, part.content, name=part.tool_name)
                elif isinstance(part, RetryPromptPart) and part.tool_name:
                    log.returned(part.tool_call_id, part.model_response(), error=True, name=part.tool_name)
            if isinstance(message, ModelResponse) and message.model_name and not self._model:
                model = message.model_name
        usage = result.usage
        turn = TokenUsage(calls=usage.requests, input_tokens=usage.input_tokens or 0,
                          output_tokens=usage.output_tokens or 0)
        files = [_file(output)] if isinstance(output, BinaryContent) else []
        said = "" if files else _said(result.new_messages()) if pauses else output_text(output)
        response = turn_response(said, log, turn, model)
        response.attachments = files
        response.pauses = pauses
        return self._session.answered(messages, response)


def _said(messages: Sequence[ModelMessage]) -> str:
    """What the model wrote beside the calls it deferred (often nothing)."""
    return "\n".join(part.content for message in messages if isinstance(message, ModelResponse)
                     for part in message.parts if isinstance(part, TextPart) and part.content.strip())


def _as_message(message: Message) -> ModelMessage:
    if message.role == "user":
        return ModelRequest(parts=[UserPromptPart(_user_content(message) if message.attachments else message.content)])
    return ModelResponse(parts=[TextPart(message.content)])


def _user_content(message: Message) -> list[Any]:
    """The text, then each file as ``BinaryContent`` (PydanticAI's inline file, named by ``identifier``)."""
    return [message.content, *(BinaryContent(f.data, media_type=f.mime_type, identifier=f.name)
                               for f in message.attachments)]


def _file(content: BinaryContent) -> Attachment:
    """A ``BinaryContent`` output (an agent whose output type is a file or an image) as a file."""
    return Attachment.from_bytes(content.data, name=content.identifier or "output", mime_type=content.media_type)


def _tool_names(agent: AbstractAgent[Any, Any]) -> Iterator[str | None]:
    """The tools of the agent's function toolsets (``@agent.tool``, ``tools=[...]``); None for any
    other toolset (MCP, a wrapper), which lists its tools only when a run starts."""
    for toolset in agent.toolsets:
        if isinstance(toolset, FunctionToolset):
            yield from toolset.tools
        else:
            yield None
