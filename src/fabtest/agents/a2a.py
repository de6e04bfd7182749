"""An agent behind the A2A protocol: ``[tool.fabtest.agents.NAME] a2a = "http://host:port"``.

The client side is the protocol's own SDK (``a2a-sdk``, the ``a2a`` extra), so fabtest speaks
whatever the agent's card offers: A2A 1.0 (``SendMessage`` / ``SendStreamingMessage``) or 0.3
(``message/send`` / ``message/stream``), over JSON-RPC or HTTP+JSON. The card is fetched once per
scenario from ``/.well-known/agent-card.json`` (then ``/.well-known/agent.json``, the path before
0.3; ``card = "..."`` names another) and checked: a card that does not parse, has no name or no
endpoint is one line naming the cause.

One scenario is one A2A context: the first message opens it, every later turn carries its
``context_id``; while a task waits for input (``input-required``) the next message carries its
``task_id`` too, so the agent continues that task. A new scenario starts a new context. Streaming is
used when the card says the agent streams (``streaming = false`` asks for one reply per message).
What comes back becomes the turn's text, files and tool calls as :mod:`fabtest.agents.a2a_events`
describes.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from fabtest._internal.extras import require_extra
from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall, declared_tools
from fabtest.agents.frameworks import Session, ToolLog
from fabtest.agents.protocol_base import RemoteAgent, check_protocol_table
from fabtest.agents.protocol_pauses import approved_calls, decision_data, decision_words, previous_pauses
from fabtest.conversation import AgentResponse, Message, Pause
from fabtest.errors import UsageError

__all__ = ["CARD_PATHS", "TABLE_KEYS", "A2AAgent", "check_card", "check_table", "fetch_card", "from_table"]

TABLE_KEYS = {"a2a", "card", "headers", "timeout", "streaming", "tools"}
#: where an agent's card is looked for, in order: A2A 0.3 and 1.0's path, then 0.2's
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
#: the transports fabtest's client offers, in its order of preference
_BINDINGS = ("JSONRPC", "HTTP+JSON")


class A2AAgent(RemoteAgent):
    """One scenario's conversation with an A2A agent: one context, the card fetched on the first turn."""

    def __init__(self, url: str, *, card: str | None = None, headers: Mapping[str, str] | None = None,
                 timeout: float = 60.0, streaming: bool = True, tools: Sequence[str] | None = None) -> None:
        require_extra("a2a", where=f"A2A agent at {url}")
        self.url = url.rstrip("/")
        self.where = f"A2A agent at {self.url}"
        self.card_path = card
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.streaming = streaming
        self.tools = declared_tools(tools, where=self.where)
        self.context_id: str | None = None
        self.task_id: str | None = None  # set while the task waits for the user (input-required)
        self.card: dict[str, Any] = {}
        self._session = Session("A2A")
        self._http: Any = None
        self._client: Any = None

    def metadata(self) -> dict[str, Any]:
        meta = self._session.metadata(adapter="a2a", url=self.url, context_id=self.context_id,
                                      agent=self.card.get("name"), agent_version=self.card.get("version"))
        return self.with_tools(meta)

    async def aclose(self) -> None:
        client, http, self._client, self._http = self._client, self._http, None, None
        with contextlib.suppress(Exception):
            if client is not None:
                await client.close()
        if http is not None:
            await http.aclose()

    async def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        from a2a.client.errors import A2AClientTimeoutError
        from a2a.types import SendMessageRequest
        from a2a.utils.errors import A2AError

        from fabtest.agents.a2a_events import FAILED, PAUSED, A2ATurn

        self._session.new_user_text(messages)
        if not self._session.continues(messages):  # a new conversation: a new context
            self.context_id = self.task_id = None
        log = ToolLog(on_tool_call)
        for call_id, tool, arguments in approved_calls(messages):  # approved: the call goes ahead now
            log.called(call_id, tool, arguments)
        turn = A2ATurn(self.where, log)
        request = SendMessageRequest(message=self._message(messages))
        try:
            client = await self._connect()
            async for event in client.send_message(request):
                turn.add(event)
        except A2AClientTimeoutError:
            raise AgentTimeout(f"{self.where} did not answer within {self.timeout:g}s") from None
        except A2AError as exc:
            raise AgentError(f"{self.where}: {_one_line(exc)}") from None
        self.context_id = turn.context_id or self.context_id
        self.task_id = turn.task_id if turn.state in PAUSED else None
        response = turn.response()
        if turn.state in FAILED:
            reason = f": {response.text}" if response.text else ""
            raise AgentError(f"{self.where}: the task {FAILED[turn.state]}{reason}")
        if turn.state in PAUSED:
            response.pauses = _pauses(turn)
        elif not response.text and not response.tool_calls and not response.attachments:
            raise AgentError(f"{self.where} ended its turn ({turn.state or 'no task'}) without a reply")
        return self._session.answered(messages, response)

    # -- the request -------------------------------------------------------------------------------

    def _message(self, messages: Sequence[Message]) -> Any:
        """The last user message as an A2A message in the scenario's context (and waiting task), with
        its files as ``raw`` parts; a conversation this context has not seen goes first, as text."""
        from a2a.types import Message as A2AMessage
        from a2a.types import Part, Role
        from google.protobuf.json_format import ParseDict

        last = messages[-1]
        parts = []
        if self.context_id is None and len(messages) > 1:
            earlier = "\n".join(f"{'User' if m.role == 'user' else 'Agent'}: {m.content}" for m in messages[:-1])
            parts.append(Part(text=f"The conversation so far:\n{earlier}"))
        parts.append(Part(text=last.content or "\n".join(decision_words(d) for d in last.decisions)))
        parts.extend(Part(raw=f.data, media_type=f.mime_type, filename=f.name) for f in last.attachments)
        pauses = previous_pauses(messages)
        for decision in last.decisions:  # an approval's decision also as ADK's function_response part
            pause = pauses.get(decision.pause_id)
            if pause is not None and pause.kind == "approval":
                parts.append(ParseDict({"data": {"id": pause.metadata.get("call_id"), "name": pause.tool,
                                                 "response": decision_data(decision)},
                                        "metadata": {"adk_type": "function_response"}}, Part()))
        return A2AMessage(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts,
                          context_id=self.context_id or "", task_id=self.task_id or "")

    async def _connect(self) -> Any:
        """The SDK client for the agent's card, built on the scenario's first turn."""
        if self._client is not None:
            return self._client
        import httpx
        from a2a.client import ClientConfig, ClientFactory

        self._http = httpx.AsyncClient(headers=self.headers, timeout=self.timeout)
        card = await fetch_card(self._http, self.url, self.card_path, where=self.where)
        factory = ClientFactory(ClientConfig(streaming=self.streaming, httpx_client=self._http,
                                             supported_protocol_bindings=list(_BINDINGS)))
        try:
            self._client = factory.create(card)
        except (ValueError, ImportError) as exc:  # fetch_card checked the transports: should not happen
            raise AgentError(f"{self.where}: {_one_line(exc)}") from None
        from google.protobuf.json_format import MessageToDict

        self.card = MessageToDict(card)
        return self._client


async def fetch_card(http: Any, url: str, path: str | None, *, where: str) -> Any:
    """The agent's card, parsed and checked: one AgentError line naming what is wrong with it."""
    import httpx
    from a2a.client.card_resolver import parse_agent_card
    from google.protobuf.json_format import ParseError

    base = url.rstrip("/")
    candidates = [path] if path else list(CARD_PATHS)
    urls = [c if c.startswith(("http://", "https://")) else f"{base}/{c.lstrip('/')}" for c in candidates]
    reply = None
    for card_url in urls:
        try:
            reply = await http.get(card_url)
        except httpx.TimeoutException:
            raise AgentTimeout(f"{where}: its agent card at {card_url} did not come within the timeout") from None
        except httpx.HTTPError as exc:
            raise AgentError(f"{where} unreachable: {type(exc).__name__}: {exc}") from None
        if reply.status_code != 404:
            break
    assert reply is not None
    if reply.status_code >= 400:
        tried = " or ".join(urls)
        raise AgentError(f"{where}: no agent card at {tried} (HTTP {reply.status_code}); set card = \"PATH\" "
                         "in the agent table if it is served elsewhere")
    try:
        data = reply.json()
    except ValueError:
        raise AgentError(f"{where}: the agent card at {reply.url} is not JSON: {reply.text[:120]!r}") from None
    try:
        card = parse_agent_card(data)
    except (ParseError, ValueError, TypeError) as exc:
        raise AgentError(f"{where}: the agent card at {reply.url} does not parse: {_one_line(exc)}") from None
    if not card.name:
        raise AgentError(f"{where}: the agent card at {reply.url} has no name")
    if not card.supported_interfaces:
        raise AgentError(f"{where}: the agent card at {reply.url} names no endpoint "
                         "(supportedInterfaces, or url in a 0.3 card)")
    offered = sorted({i.protocol_binding for i in card.supported_interfaces})
    if not set(offered) & set(_BINDINGS):
        raise AgentError(f"{where}: its card offers {', '.join(offered)}; fabtest speaks {' and '.join(_BINDINGS)}")
    return card


async def check_card(table: Mapping[str, Any]) -> None:
    """The pre-flight's look at the card of an ``a2a`` table: fetched and checked like a first turn's."""
    import httpx

    url = str(table["a2a"]).rstrip("/")
    async with httpx.AsyncClient(headers=dict(table.get("headers") or {}), timeout=10.0) as http:
        await fetch_card(http, url, table.get("card"), where=f"A2A agent at {url}")


def check_table(table: Mapping[str, Any], *, where: str) -> None:
    """A misspelt key (with its likely spelling), a bad value or a missing extra, before any request."""
    if not isinstance(table.get("streaming", True), bool):
        raise UsageError(f"{where}: streaming must be true or false, got {table['streaming']!r}")
    if not isinstance(table.get("card", ""), str):
        raise UsageError(f"{where}: card must be the agent card's path or URL, got {table['card']!r}")
    check_protocol_table(table, keys=TABLE_KEYS, key="a2a", label="an A2A", url_is="the agent's base URL",
                         extra="a2a", where=where)


def from_table(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> A2AAgent:
    """``{a2a = "URL", card = "PATH", headers = {...}, timeout = 60, streaming = true, tools = [...]}``."""
    check_table(table, where=where)
    return A2AAgent(table["a2a"], card=table.get("card"), headers=table.get("headers"),
                    timeout=float(table.get("timeout", 60.0)), streaming=table.get("streaming", True),
                    tools=table.get("tools"))


def _pauses(turn: Any) -> list[Pause]:
    """An ``input-required`` task as pauses: an approval of each call it asks (ADK's long-running
    calls), else one question, the status message's text."""
    question = turn.final or None
    if turn.asked:
        return [Pause(tool=a.name, arguments=a.arguments, question=question, id=a.call_id,
                      metadata={"task_id": turn.task_id, "call_id": a.call_id}) for a in turn.asked]
    return [Pause(question=question or "(the agent asks for input without saying what)", id=turn.task_id,
                  metadata={"task_id": turn.task_id})]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
