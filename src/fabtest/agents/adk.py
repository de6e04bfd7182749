"""A Google ADK agent under test: ``[tool.fabtest.agents.NAME] adk = "module:root_agent"``.

Each scenario gets its own ADK session in an in-memory session service; each user message is one
``runner.run_async(...)`` on it. The run's events become the turn: a ``function_call`` part a tool
call with its arguments, the ``function_response`` of the same id its result (reported as it
arrives), ``usage_metadata`` the tokens (thinking counted as output, as it is billed) and
``model_version`` (else the agent's ``model``) the model for cost. The reply is the text of the
run's final response events, and their ``inline_data`` parts its files; the user's files go to the
agent as ``inline_data`` parts of the message (``types.Part.from_bytes``).
"""

from __future__ import annotations

import mimetypes
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.genai import types

from fabtest.agents import adk_pauses
from fabtest.agents.base import OnToolCall
from fabtest.agents.builtin_models import gemini_parts
from fabtest.agents.frameworks import Session, ToolLog, known_tools, model_name, resolve_target, turn_response
from fabtest.conversation import AgentResponse, Attachment, Message, Pause, TokenUsage

__all__ = ["ADKAgent"]

_APP = "fabtest"
_USER = "fabtest-user"


class ADKAgent:
    """One scenario's ADK session with a root agent; see the module docstring."""

    declared_tools: list[str] | None = None  # the table's tools = [...], which wins over the agent's

    def __init__(self, agent: BaseAgent, *, model: str | None = None) -> None:
        self.agent = agent
        self._configured = model  # the table's model = "...", which wins for cost
        self._model = model or model_name(getattr(agent, "model", None))
        self._session = Session("adk")
        self._runner: Runner | None = None
        self._session_id: str | None = None

    @classmethod
    def from_target(cls, target: Any, context: Mapping[str, Any], *, where: str, model: str | None = None) -> ADKAgent:
        return cls(resolve_target(target, BaseAgent, context, where=where,
                                  what="an ADK agent (google.adk.agents.Agent, LlmAgent or another BaseAgent)"),
                   model=model)

    def metadata(self) -> dict[str, Any]:
        """Totals, the session, and ``tools``: the agent tree's tools (a step naming another is a typo)."""
        tools = self.declared_tools if self.declared_tools is not None else known_tools(_tool_names(self.agent))
        return self._session.metadata(agent=self.agent.name, model=self._model, session_id=self._session_id,
                                      tools=tools)

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        text = self._session.new_user_text(messages)
        if self._runner is None or not self._session.continues(messages):
            await self._new_session(messages[:-1])
        assert self._runner is not None and self._session_id is not None
        log = ToolLog(on_tool_call)
        usage = TokenUsage()
        model = self._model
        texts: list[str] = []
        asked = types.Content(role="user", parts=gemini_parts(text, messages[-1].attachments))
        held: set[str] = set()  # the calls waiting for confirmation: the pause, not calls made
        if messages[-1].decisions and messages[-2].pauses:  # the answer to the confirmations of the last turn
            asked = adk_pauses.confirmations(messages[-2].pauses, messages[-1].decisions)
            decided = {d.pause_id: d for d in messages[-1].decisions}
            for pause in messages[-2].pauses:
                decision = decided.get(pause.id)
                if decision is not None and decision.approved:  # made now: recorded here, with its result
                    log.called(str(pause.metadata.get("call") or pause.id), pause.tool or "tool", pause.arguments)
                else:
                    held.add(str(pause.metadata.get("call")))
        pauses: list[Pause] = []
        files: list[Attachment] = []
        async for event in self._runner.run_async(user_id=_USER, session_id=self._session_id, new_message=asked):
            if event.partial:
                continue
            for part in (event.content.parts or []) if event.content else []:
                if part.function_call is not None and part.function_call.name == adk_pauses.CONFIRMATION:
                    pauses.append(adk_pauses.pause_of(part.function_call))
                    held.add(str(pauses[-1].metadata.get("call")))
                elif part.function_response is not None and (part.function_response.name == adk_pauses.CONFIRMATION
                                                             or part.function_response.id in held):
                    continue
                elif part.function_call is not None:
                    log.called(part.function_call.id, part.function_call.name or "?", part.function_call.args)
                elif part.function_response is not None:
                    log.returned(part.function_response.id, part.function_response.response,
                                 name=part.function_response.name)
            if event.usage_metadata is not None:
                used = event.usage_metadata
                usage.add(TokenUsage(calls=1, input_tokens=used.prompt_token_count or 0,
                                     output_tokens=(used.candidates_token_count or 0)
                                     + (used.thoughts_token_count or 0)))
                model = self._configured or event.model_version or model
            if event.is_final_response() and event.content and event.author != "user":
                texts.extend(p.text for p in event.content.parts or [] if p.text and not p.thought)
                files.extend(_inline_files(event.content.parts or [], len(files)))
        if pauses:
            log.held()  # the call asked to be confirmed, its result only ADK's "requires confirmation"
        response = turn_response("\n".join(texts), log, usage, model, session_id=self._session_id)
        response.attachments = files
        response.pauses = pauses
        return self._session.answered(messages, response)

    async def _new_session(self, prior: Sequence[Message]) -> None:
        """A fresh session (the scenario's first turn, or a conversation the last session did not hold),
        with the earlier messages, if any, as its events."""
        service = InMemorySessionService()
        self._runner = Runner(app_name=_APP, agent=self.agent, session_service=service)
        session = await service.create_session(app_name=_APP, user_id=_USER, session_id=str(uuid.uuid4()))
        self._session_id = session.id
        for message in prior:
            user = message.role == "user"
            await service.append_event(session, Event(
                author="user" if user else self.agent.name, invocation_id=f"fabtest-{uuid.uuid4()}",
                content=types.Content(role="user" if user else "model",
                                      parts=gemini_parts(message.content, message.attachments))))


def _inline_files(parts: Sequence[types.Part], before: int) -> list[Attachment]:
    """The reply's ``inline_data`` parts (a generated image, an artifact) as files."""
    files: list[Attachment] = []
    for part in parts:
        blob = part.inline_data
        if blob is not None and blob.data:
            mime_type = blob.mime_type or "application/octet-stream"
            name = blob.display_name or f"file-{before + len(files) + 1}{mimetypes.guess_extension(mime_type) or ''}"
            files.append(Attachment.from_bytes(blob.data, name=name, mime_type=mime_type))
    return files


def _tool_names(agent: BaseAgent) -> Iterator[str | None]:
    """The tools of ``agent`` and its sub-agents as ADK names them: a function by its name, a tool
    (an ``AgentTool`` too) by ``.name``, ``transfer_to_agent`` where sub-agents exist; a toolset
    (MCP, OpenAPI) is None, since it lists its tools only when a run starts."""
    for item in getattr(agent, "tools", None) or []:
        if isinstance(item, BaseTool):
            yield item.name
        elif callable(item) and not isinstance(item, BaseToolset):
            yield getattr(item, "__name__", None)
        else:
            yield None
    if agent.sub_agents:
        yield "transfer_to_agent"
    for sub in agent.sub_agents:
        yield from _tool_names(sub)
