"""A LangGraph graph under test: ``[tool.fabtest.agents.NAME] langgraph = "module:graph"``.

The graph is a compiled graph whose state has ``messages`` (``MessagesState``, a prebuilt or
``create_agent`` agent), or a function returning one. Each user message is one ``await
graph.ainvoke({"messages": [HumanMessage]})``: with a checkpointer, on a thread id of the
scenario's own (a fresh thread per scenario); without one, fabtest keeps the scenario's messages
and sends them all. The messages after the user's become the turn: ``AIMessage.tool_calls`` the
tool calls with their arguments, the ``ToolMessage`` of the same id their result,
``usage_metadata`` the tokens and ``response_metadata["model_name"]`` the model.

Every ``ToolNode`` of the graph gets fabtest's tool-call wrapper (composed with the graph's own
``wrap_tool_call``, once per node): a scenario's stub of a tool answers there with a
``ToolMessage`` instead of the tool (:mod:`fabtest.agents.stubs`); without a stub the call goes on
unchanged, so the shared graph behaves as before outside fabtest's scenarios.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from fabtest.agents import langgraph_pauses, stubs
from fabtest.agents.base import AgentError, OnToolCall
from fabtest.agents.file_parts import langchain_content, langchain_files
from fabtest.agents.frameworks import Session, ToolLog, resolve_target, turn_response
from fabtest.conversation import AgentResponse, Attachment, Message, TokenUsage

__all__ = ["LangGraphAgent"]


def _hint(obj: Any) -> str | None:
    if isinstance(obj, StateGraph):
        return ("this StateGraph was not compiled: point the table at graph = builder.compile(checkpointer="
                "InMemorySaver()), or at a function returning it")
    return None


class LangGraphAgent:
    """One scenario's thread of a compiled LangGraph graph; see the module docstring."""

    declared_tools: list[str] | None = None  # the table's tools = [...], which wins over the ToolNodes'

    def __init__(self, graph: Pregel[Any, Any, Any, Any], *, model: str | None = None) -> None:
        self.graph = graph
        self._model = model
        self._session = Session("langgraph")
        self._thread = str(uuid.uuid4())
        self._messages: list[BaseMessage] = []  # the conversation, for a graph without a checkpointer
        self._state: dict[str, Any] = {}  # the graph's state after the latest turn
        self._checkpointed = isinstance(getattr(graph, "checkpointer", None), BaseCheckpointSaver)
        self._tool_nodes = [node.bound for node in getattr(graph, "nodes", {}).values()
                            if isinstance(getattr(node, "bound", None), ToolNode)]
        for tool_node in self._tool_nodes:
            _intercept(tool_node)

    @classmethod
    def from_target(cls, target: Any, context: Mapping[str, Any], *, where: str,
                    model: str | None = None) -> LangGraphAgent:
        return cls(resolve_target(target, Pregel, context, where=where, hint=_hint,
                                  what="a compiled LangGraph graph (builder.compile())"), model=model)

    def state(self) -> dict[str, Any]:
        """The graph's state after the latest turn (``messages`` and every other key), for end-state steps."""
        return self._state

    def stubbable_tools(self) -> list[str]:
        """The tools of the graph's ToolNodes: fabtest answers their stubs inside the node."""
        return [name for node in self._tool_nodes for name in node.tools_by_name]

    def metadata(self) -> dict[str, Any]:
        """Totals, the thread, and ``tools``: the ToolNodes' tools, so a misspelt tool in a step is an
        error with a "did you mean" and coverage counts the tools never called."""
        return self._session.metadata(graph=getattr(self.graph, "name", None), model=self._model,
                                      thread_id=self._thread if self._checkpointed else None,
                                      tools=self.declared_tools if self.declared_tools is not None
                                      else self.stubbable_tools() or None)

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        self._session.new_user_text(messages)
        if messages[-1].decisions and self._session.continues(messages):
            return await self._resume(messages, on_tool_call)
        asked = HumanMessage(content=langchain_content(messages[-1]), id=str(uuid.uuid4()))  # type: ignore[arg-type, unused-ignore]
        prior: list[BaseMessage] = []
        if not self._session.continues(messages):
            self._thread = str(uuid.uuid4())
            prior = [HumanMessage(content=langchain_content(m)) if m.role == "user"  # type: ignore[arg-type, unused-ignore]
                     else AIMessage(content=langchain_content(m)) for m in messages[:-1]]  # type: ignore[arg-type, unused-ignore]
        elif not self._checkpointed:
            prior = self._messages
        config: Any = {"configurable": {"thread_id": self._thread}} if self._checkpointed else None
        state = await self.graph.ainvoke({"messages": [*prior, asked]}, config)
        out = self._read(state)
        start = next((i + 1 for i, m in enumerate(out) if getattr(m, "id", None) == asked.id), len(out))
        return self._session.answered(messages, self._paused(state, self._turn(out[start:], on_tool_call,
                                                                                 paused=_interrupted(state))))

    async def _resume(self, messages: Sequence[Message], on_tool_call: OnToolCall | None) -> AgentResponse:
        """The user's decisions on the interrupts the last turn ended on, as ``Command(resume=...)``
        (:mod:`fabtest.agents.langgraph_pauses`) on the scenario's thread."""
        before = len(self._messages)
        command = langgraph_pauses.resume_command(messages[-2].pauses, messages[-1].decisions)
        state = await self.graph.ainvoke(command, {"configurable": {"thread_id": self._thread}})
        out = self._read(state)
        new = out[before:]
        answered = {m.tool_call_id for m in new if isinstance(m, ToolMessage)}
        # the calls the pause held (asked before it, answered after it) belong to this turn
        held = langgraph_pauses.held_calls(
            [c for m in out[:before] if isinstance(m, AIMessage) for c in m.tool_calls if c.get("id") in answered],
            messages[-2].pauses, messages[-1].decisions)
        return self._session.answered(messages, self._paused(state, self._turn(new, on_tool_call, held=held,
                                                                                 paused=_interrupted(state))))

    def _read(self, state: Any) -> list[BaseMessage]:
        out = state.get("messages") if isinstance(state, Mapping) else None
        if not isinstance(out, list):
            raise AgentError(f"the LangGraph graph's state has no 'messages' list (got {type(state).__name__}); "
                             "fabtest drives graphs whose state has messages, like MessagesState")
        self._messages = list(out)
        self._state = {k: v for k, v in state.items() if k != "__interrupt__"}
        return out

    def _paused(self, state: Mapping[str, Any], response: AgentResponse) -> AgentResponse:
        """The turn's pauses: the interrupts the graph stopped on (a graph without a checkpointer
        cannot be resumed: that is the agent's error, named)."""
        interrupts = state.get("__interrupt__") or []
        if interrupts and not self._checkpointed:
            raise AgentError("the LangGraph graph called interrupt() but has no checkpointer, so it cannot be "
                             "resumed: compile it with one, e.g. builder.compile(checkpointer=InMemorySaver())")
        response.pauses = langgraph_pauses.pauses_of(interrupts)
        return response

    def _turn(self, new: list[BaseMessage], on_tool_call: OnToolCall | None, *, held: Sequence[Any] = (),
              paused: bool = False) -> AgentResponse:
        log = ToolLog(on_tool_call)
        for call in held:
            log.called(call.get("id"), call["name"], call.get("args"))
        usage = TokenUsage()
        model = self._model
        texts: list[str] = []
        files: list[Attachment] = []
        for message in new:
            if isinstance(message, AIMessage):
                files.extend(langchain_files(message.content, where="the LangGraph graph's reply"))
                for call in message.tool_calls:
                    log.called(call.get("id"), call["name"], call.get("args"))
                tokens: Mapping[str, Any] = message.usage_metadata or {}
                usage.add(TokenUsage(calls=1, input_tokens=int(tokens.get("input_tokens") or 0),
                                     output_tokens=int(tokens.get("output_tokens") or 0)))
                named = message.response_metadata.get("model_name") or message.response_metadata.get("model")
                model = self._model or named or model
                if message.text:
                    texts.append(message.text)
            elif isinstance(message, ToolMessage):
                log.returned(message.tool_call_id, message.content, error=message.status == "error",
                             name=message.name)
        if paused:
            log.held()
        text = texts[-1] if texts else ""  # the answer is the last thing the graph said
        response = turn_response(text, log, usage, model, thread_id=self._thread if self._checkpointed else None)
        response.attachments = files
        return response


def _interrupted(state: Any) -> bool:
    return isinstance(state, Mapping) and bool(state.get("__interrupt__"))


def _intercept(node: ToolNode) -> None:
    """Put fabtest's stub answer in front of ``node``'s tool calls, around the node's own wrappers."""
    if getattr(node, "_fabtest_stubs", False):
        return
    own_sync, own_async = node._wrap_tool_call, node._awrap_tool_call  # the documented hooks, set late

    def answer(request: Any) -> tuple[float, ToolMessage | None]:
        call = request.tool_call
        stub = stubs.current(call["name"])
        if stub is None:
            return 0.0, None
        arguments = call.get("args") or {}
        found = stub.answer(arguments)
        if found is None:
            return stub.delay_s or 0.0, None
        stubs.record(stubs.stubbed_call(call["name"], arguments, found, id=call.get("id")))
        return found.delay_s, ToolMessage(content=stubs.as_text(found.result), name=call["name"],
                                          tool_call_id=call["id"], status="error" if found.is_error else "success")

    def wrap(request: Any, execute: Any) -> Any:
        delay, message = answer(request)
        if delay:
            time.sleep(delay)
        if message is not None:
            return message
        return own_sync(request, execute) if own_sync is not None else execute(request)

    async def awrap(request: Any, execute: Any) -> Any:
        delay, message = answer(request)
        if delay:
            await asyncio.sleep(delay)
        if message is not None:
            return message
        return await own_async(request, execute) if own_async is not None else await execute(request)

    node._wrap_tool_call = wrap
    if own_sync is None or own_async is not None:  # a sync-only wrapper of the graph's stays in the async path
        node._awrap_tool_call = awrap
    vars(node)["_fabtest_stubs"] = True  # a mark on the node itself: typed alike with langgraph installed or not
