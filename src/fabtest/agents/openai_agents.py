"""An OpenAI Agents SDK agent under test: ``[tool.fabtest.agents.NAME] openai_agents = "module:agent"``.

Each user message is one ``await Runner.run(agent, text, session=...)`` on an in-memory
``SQLiteSession`` of the scenario's own (a fresh session per scenario), so earlier turns, tool
calls included, are in the model's input. The run's items become the turn: a ``ToolCallItem`` a
tool call with its arguments, the ``ToolCallOutputItem`` of the same ``call_id`` its result; the
run's usage gives the tokens and the agent's model (or the response's) the model for cost.
Handoffs are followed by the SDK and recorded as it names them: the ``HandoffCallItem``
(``transfer_to_<agent>``) as a tool call, its ``HandoffOutputItem`` as a handoff event in the
turn's metadata; the next turn starts at the run's ``last_agent``, as the SDK's examples continue
a conversation. The table's ``context = "module:factory"`` builds the run context every run gets
(``Runner.run(..., context=...)``), which is the agent's end state for ``Then the state ...``
(:mod:`fabtest.agents.framework_context`). The reply is the run's final output.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, Handoff, Runner, SQLiteSession
from agents.items import HandoffCallItem, HandoffOutputItem, ToolCallItem, ToolCallOutputItem

from fabtest.agents import openai_agents_pauses
from fabtest.agents.base import OnToolCall
from fabtest.agents.file_parts import responses_content
from fabtest.agents.framework_context import no_run_context
from fabtest.agents.frameworks import (
    Session,
    ToolLog,
    known_tools,
    model_name,
    output_text,
    resolve_target,
    turn_response,
)
from fabtest.agents.handoffs import Handoffs, reachable_tools
from fabtest.conversation import AgentResponse, Message, TokenUsage

__all__ = ["OpenAIAgentsAgent"]


class OpenAIAgentsAgent:
    """One scenario's session with an OpenAI Agents SDK agent; see the module docstring."""

    declared_tools: list[str] | None = None  # the table's tools = [...], which wins over the agent's
    run_context: Any = None  # the table's context = "module:factory", built for this scenario

    def __init__(self, agent: Agent[Any], *, model: str | None = None) -> None:
        self.agent = agent
        self._model = model
        self._session = Session("openai-agents")
        self._sdk_session = SQLiteSession(str(uuid.uuid4()))
        self._current: Agent[Any] = agent  # the agent holding the conversation: the last run's last_agent
        self._waiting: openai_agents_pauses.Waiting | None = None  # a run stopped for approval
        self._recorded: set[str] = set()  # call ids already recorded on a turn (a resumed run repeats them)

    @classmethod
    def from_target(cls, target: Any, context: Mapping[str, Any], *, where: str,
                    model: str | None = None) -> OpenAIAgentsAgent:
        return cls(resolve_target(target, Agent, context, where=where, what="an agents.Agent"), model=model)

    def metadata(self) -> dict[str, Any]:
        """Totals, the session, ``tools``: the function tools and handoff tools of the agent and of
        the agents it hands off to (a step naming another is a typo), and ``agents``: their names."""
        tools = self.declared_tools if self.declared_tools is not None else known_tools(_tool_names(self.agent, set()))
        return self._session.metadata(agent=self.agent.name, model=self._model or model_name(self.agent.model),
                                      session_id=self._sdk_session.session_id, tools=tools,
                                      agents=known_tools(a.name for a in _agents(self.agent, set())))

    def state(self) -> Any:
        """The run context as the tools and hooks left it (``context = "module:factory"``)."""
        if self.run_context is None:
            raise no_run_context("OpenAI Agents SDK")
        return self.run_context

    def stubbable_tools(self) -> list[str]:
        """The agent's function tools decorated with ``@fabtest.tool``: a stub or fault reaches those."""
        return reachable_tools(known_tools(_tool_names(self.agent, set())))

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        text = self._session.new_user_text(messages)
        waiting, self._waiting = self._waiting, None
        if messages[-1].decisions and waiting is not None and self._session.continues(messages):
            rejected = waiting.decide(messages[-1].decisions)
            result = await Runner.run(self._current, waiting.state, session=self._sdk_session)
            return self._answer(messages, result, on_tool_call, skip=rejected)
        if not self._session.continues(messages):
            self._sdk_session = SQLiteSession(str(uuid.uuid4()))
            self._current = self.agent
            # an assistant's earlier files are not resent: the API takes none from the assistant
            items: list[Any] = [{"role": "user", "content": responses_content(m)} if m.role == "user"
                                else {"role": "assistant", "content": m.content} for m in messages[:-1]]
            await self._sdk_session.add_items(items)
        asked: Any = text
        if messages[-1].attachments:  # input_image / input_file parts beside the text
            asked = [{"role": "user", "content": responses_content(messages[-1])}]
        result = await Runner.run(self._current, asked, session=self._sdk_session, context=self.run_context)
        return self._answer(messages, result, on_tool_call)

    def _answer(self, messages: Sequence[Message], result: Any, on_tool_call: OnToolCall | None, *,
                skip: Collection[str] = ()) -> AgentResponse:
        """The run's items as the turn; a run stopped for approval waits with its state, its held
        calls recorded by the turn that resumes it (``skip``: the rejected ones, never made)."""
        interruptions = list(getattr(result, "interruptions", None) or [])
        pauses = openai_agents_pauses.pauses_of(interruptions)
        held = {p.id for p in pauses} | set(skip)
        log = ToolLog(on_tool_call)
        handoffs = Handoffs(self._current.name)
        for item in result.new_items:
            raw: Any = item.raw_item
            call_id = _call_id(raw)
            if call_id is not None and (call_id in held or call_id in self._recorded):
                continue
            if isinstance(item, (ToolCallItem, HandoffCallItem)):
                name = str(getattr(raw, "name", None) or getattr(raw, "type", "tool"))  # a hosted tool has no name
                log.called(call_id, name, getattr(raw, "arguments", None))
            elif isinstance(item, ToolCallOutputItem):
                log.returned(call_id, item.output)
                if call_id is not None:
                    self._recorded.add(call_id)
            elif isinstance(item, HandoffOutputItem):
                _handed_off(item, log, handoffs)
                if call_id is not None:
                    self._recorded.add(call_id)
        self._current = result.last_agent
        if interruptions:
            self._waiting = openai_agents_pauses.Waiting(result.to_state(), interruptions, pauses)
        used = result.context_wrapper.usage
        usage = TokenUsage(calls=used.requests, input_tokens=used.input_tokens, output_tokens=used.output_tokens)
        model = self._model or model_name(result.last_agent.model) or _response_model(result.new_items)
        response = turn_response(output_text(result.final_output), log, usage, model,
                                 agent=result.last_agent.name)
        response.pauses = pauses
        return self._session.answered(messages, handoffs.attach(response))


def _call_id(raw: Any) -> Any:
    return raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)


def _handed_off(item: HandoffOutputItem, log: ToolLog, handoffs: Handoffs) -> None:
    """A handoff the SDK made: the result of its ``transfer_to_*`` call, and a handoff event."""
    call_id = _call_id(item.raw_item)
    tool = next((c.name for c in log.calls if c.metadata.get("id") == call_id), None) if call_id else None
    output = item.raw_item.get("output") if isinstance(item.raw_item, Mapping) else None
    log.returned(call_id, output)
    handoffs.handed(item.source_agent.name, item.target_agent.name, tool)


def _response_model(items: Sequence[Any]) -> str | None:
    """The model the Responses/Chat Completions call reported (an agent left on the SDK's default)."""
    for item in reversed(items):
        data = getattr(item.raw_item, "provider_data", None)
        if isinstance(data, Mapping) and isinstance(data.get("model"), str):
            return str(data["model"])
    return None


def _handoff_agent(target: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | None:
    """The agent a handoff goes to: the agent itself, or the one ``handoff(agent=...)`` was built for
    (the SDK keeps a weak reference to it); None when the SDK does not say."""
    if isinstance(target, Agent):
        return target
    ref = getattr(target, "_agent_ref", None)
    found = ref() if callable(ref) else None
    return found if isinstance(found, Agent) else None


def _agents(agent: Agent[Any], seen: set[int]) -> Iterator[Agent[Any] | Any]:
    """``agent`` and every agent it can hand off to, once each; a handoff whose agent is unknown
    yields an object without a name (so the list is not partial)."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    yield agent
    for target in agent.handoffs:
        found = _handoff_agent(target)
        if found is None:
            yield _Unnamed()
        else:
            yield from _agents(found, seen)


class _Unnamed:
    name = None


def _tool_names(agent: Agent[Any], seen: set[int]) -> Iterator[str | None]:
    """The function tools and handoff tools (``transfer_to_*``) of ``agent`` and of every agent it
    can hand off to (a run follows handoffs); None for what cannot be named before a run: a hosted
    tool (its calls carry the call's type, not the tool's name), an MCP server, a handoff whose agent
    the SDK does not say."""
    for each in _agents(agent, seen):
        if not isinstance(each, Agent):
            yield None
            continue
        for tool in each.tools:
            yield tool.name if isinstance(tool, FunctionTool) else None
        if each.mcp_servers:
            yield None
        for target in each.handoffs:
            yield target.tool_name if isinstance(target, Handoff) else Handoff.default_tool_name(target)
