"""An agent behind the AG-UI protocol: ``[tool.fabtest.agents.NAME] ag_ui = "http://host:port/agent"``.

Each user message is one run: a POST of ``RunAgentInput`` (the thread's id, a new run id, the
thread's messages, the agent's state) to the URL, answered by a stream of Server-Sent Events that
:mod:`fabtest.agents.ag_ui_events` folds into the reply, its tool calls and the agent's state. The
request is built and the events validated with the protocol's own SDK (``ag-ui-protocol``, the
``ag-ui`` extra).

One scenario is one thread: like AG-UI's own clients, fabtest keeps the thread's messages (the
user's, the assistant's with their tool calls, the tool results; or the agent's
``MESSAGES_SNAPSHOT``) and sends them all on every run, with the state the agent last sent
(``state = {...}`` in the table is the first run's). A new scenario is a new thread.

Interrupts are pauses (:mod:`fabtest.agents.ag_ui_events`); the next run resumes them as the protocol
says, with one ``resume`` entry per interrupt: ``resolved`` with the decision as its payload
(``{"decision": "approved", "approved": true}``, with ``reason`` or the edited ``arguments``; a
question's answer as text), or ``cancelled`` when the user's next message decides nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from fabtest._internal.extras import require_extra
from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall, declared_tools
from fabtest.agents.file_parts import b64
from fabtest.agents.frameworks import Session, ToolLog
from fabtest.agents.protocol_base import RemoteAgent, check_protocol_table
from fabtest.agents.protocol_pauses import approved_calls, decision_data
from fabtest.conversation import AgentResponse, Message, Pause, jsonable

__all__ = ["TABLE_KEYS", "AgUiAgent", "check_table", "from_table"]

TABLE_KEYS = {"ag_ui", "headers", "timeout", "state", "forwarded_props", "tools"}
_PROTOCOL_VERSION = "1.0"


class AgUiAgent(RemoteAgent):
    """One scenario's thread with an AG-UI agent (see the module docstring)."""

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 60.0,
                 state: Any = None, forwarded_props: Any = None, tools: Sequence[str] | None = None) -> None:
        require_extra("ag-ui", where=f"AG-UI agent at {url}")
        self.url = url
        self.where = f"AG-UI agent at {url}"
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.tools = declared_tools(tools, where=self.where)
        self.thread_id = str(uuid.uuid4())
        self._first_state = jsonable(state)
        self._state = self._first_state
        # always sent: ag-ui-protocol before 1.0 requires forwardedProps (and tools, context) in RunAgentInput
        self._forwarded = jsonable(forwarded_props) if forwarded_props is not None else {}
        self._messages: list[dict[str, Any]] = []
        self._pending: dict[str, Pause] = {}  # the interrupts the last run ended on, by id
        self._session = Session("AG-UI")
        self._http: Any = None

    def metadata(self) -> dict[str, Any]:
        meta = self._session.metadata(adapter="ag-ui", url=self.url, thread_id=self.thread_id)
        return self.with_tools(meta)

    def state(self) -> Any:
        """The agent's state after the latest run (its snapshots and deltas), for ``Then the state ...``."""
        return self._state

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        from fabtest.agents.ag_ui_events import AgUiRun

        self._session.new_user_text(messages)
        if not self._session.continues(messages):  # a conversation this thread has not had: a new thread
            self.thread_id, self._state, self._pending = str(uuid.uuid4()), self._first_state, {}
            self._messages = [_wire_message(m) for m in messages[:-1]]
        resume = self._resume(messages[-1])
        if not messages[-1].decisions:  # a decision's words travel in its resume entry
            self._messages.append(_wire_message(messages[-1]))
        log = ToolLog(on_tool_call)
        for call_id, tool, arguments in approved_calls(messages):  # approved: the call goes ahead now
            log.called(call_id, tool, arguments)
        run = AgUiRun(self.where, log, self._state, list(self._messages))
        run_id = str(uuid.uuid4())
        async for event in self._events(self._input(run_id, resume)):
            run.add(event)
        if run.outcome is None:
            raise AgentError(f"{self.where}: the event stream ended before RUN_FINISHED or RUN_ERROR")
        pauses = run.pauses()
        self._pending = {p.id: p for p in pauses}
        self._messages, self._state = run.thread(), run.state
        response = AgentResponse(text=run.text, tool_calls=run.tool_calls(), pauses=pauses, metadata={
            "usage": run.usage.to_dict(), "thread_id": self.thread_id, "run_id": run_id, "outcome": run.outcome})
        if run.model:
            response.metadata["model"] = run.model
        if not (response.text or response.tool_calls or pauses):
            raise AgentError(f"{self.where} finished its run ({run.outcome}) without a reply")
        return self._session.answered(messages, response)

    def _resume(self, last: Message) -> list[dict[str, Any]] | None:
        """The resume entries answering the previous run's interrupts: an approval's decision as
        ``{decision, approved, reason?, arguments?}``, a question's answer as its text; an interrupt the
        message does not decide is cancelled (abandoned, as the protocol says)."""
        if not self._pending:
            return None
        decisions = {d.pause_id: d for d in last.decisions}
        entries: list[dict[str, Any]] = []
        for pause_id, pause in self._pending.items():
            decision = decisions.get(pause_id)
            if decision is None:
                entries.append({"interruptId": pause_id, "status": "cancelled"})
            else:
                payload = decision.answer if pause.kind == "question" else decision_data(decision)
                entries.append({"interruptId": pause_id, "status": "resolved", "payload": payload})
        return entries

    def _input(self, run_id: str, resume: list[dict[str, Any]] | None) -> dict[str, Any]:
        from ag_ui.core import RunAgentInput

        body = RunAgentInput.model_validate({  # the wire's names: the SDK checks the shape before it is sent
            "threadId": self.thread_id, "runId": run_id, "protocolVersion": _PROTOCOL_VERSION,
            "messages": self._messages, "state": self._state, "tools": [], "context": [],
            "forwardedProps": self._forwarded, "resume": resume})
        return body.model_dump(by_alias=True, mode="json")

    async def _events(self, body: dict[str, Any]) -> AsyncIterator[Any]:
        """POST the run and yield its events, each validated as an AG-UI event."""
        import httpx
        from ag_ui.core import Event
        from pydantic import TypeAdapter, ValidationError

        if self._http is None:
            self._http = httpx.AsyncClient(headers=self.headers, timeout=self.timeout)
        adapter: TypeAdapter[Any] = TypeAdapter(Event)
        try:
            async with self._http.stream("POST", self.url, json=body,
                                         headers={"Accept": "text/event-stream"}) as reply:
                if reply.status_code >= 400:
                    await reply.aread()
                    raise AgentError(f"{self.where} answered {reply.status_code}: {reply.text[:300]}")
                async for data in _sse_data(reply.aiter_lines()):
                    try:
                        yield adapter.validate_json(data)
                    except ValidationError as exc:
                        raise AgentError(f"{self.where} sent an event that is not AG-UI: {data[:160]} "
                                         f"({exc.errors()[0]['msg']})") from None
        except httpx.TimeoutException:
            raise AgentTimeout(f"{self.where} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise AgentError(f"{self.where} unreachable: {type(exc).__name__}: {exc}") from None


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each Server-Sent Event (its ``data:`` lines joined), per the HTML standard's parsing."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def _wire_message(message: Message) -> dict[str, Any]:
    """A fabtest message as an AG-UI message: a user's files as image or document parts, inline base64."""
    if message.role == "agent":
        return {"id": str(uuid.uuid4()), "role": "assistant", "content": message.content}
    content: Any = message.content
    if message.attachments:
        content = [{"type": "text", "text": message.content}] + [
            {"type": "image" if f.is_image else "document",
             "source": {"type": "data", "value": b64(f.data), "mimeType": f.mime_type}, "metadata": {"name": f.name}}
            for f in message.attachments]
    return {"id": str(uuid.uuid4()), "role": "user", "content": content}


def check_table(table: Mapping[str, Any], *, where: str) -> None:
    """A misspelt key (with its likely spelling), a bad value or a missing extra, before any request."""
    check_protocol_table(table, keys=TABLE_KEYS, key="ag_ui", label="an AG-UI", url_is="the agent's run endpoint",
                         extra="ag-ui", where=where)


def from_table(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> AgUiAgent:
    """``{ag_ui = "URL", headers = {...}, timeout = 60, state = {...}, forwarded_props = {...}, tools = [...]}``."""
    check_table(table, where=where)
    return AgUiAgent(table["ag_ui"], headers=table.get("headers"), timeout=float(table.get("timeout", 60.0)),
                     state=table.get("state"), forwarded_props=table.get("forwarded_props"), tools=table.get("tools"))
