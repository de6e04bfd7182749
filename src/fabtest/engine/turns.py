"""One turn: send a user message, get the agent's response, classify the topic, record it.

Scripted mode calls :meth:`ConversationRunner.say` per ``When the user says``; simulated mode calls
it once per message the simulator writes (that loop, with its stop conditions and turn limit, is
:mod:`fabtest.engine.simulation`'s). Agent failures become explicit exceptions (AgentError,
AgentTimeout) that the pytest plugin maps to failure types.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fabtest import tracing
from fabtest._internal.threads import ReusableThreads
from fabtest.agents import aio, stubs, trace_calls
from fabtest.agents.base import Agent, AgentError, AgentTimeout
from fabtest.agents.boundary import (
    AgentDataError,
    accepts_keyword,
    coerce_response,
    coerce_tool_call,
    guarded,
    guarded_async,
    merge_tool_calls,
)
from fabtest.agents.voice import is_voice_agent
from fabtest.conversation import (
    AgentResponse,
    Attachment,
    Conversation,
    Decision,
    DecisionKind,
    Message,
    ToolCall,
    Turn,
    VoiceTurn,
    describe_decision,
    describe_pause,
)
from fabtest.engine.faults import forced_decisions
from fabtest.engine.voice import VoiceTurns
from fabtest.errors import ScenarioTimeout, UsageError

TurnHook = Callable[[Turn], None]


#: how long an async agent's ``cancel()`` may take after a timeout before fabtest moves on
CANCEL_TIMEOUT_S = 10.0

#: Every turn is logged at INFO: ``pytest --log-cli-level=INFO`` shows conversations as they happen.
log = logging.getLogger("fabtest.conversation")


class ConversationRunner:
    """Drives one conversation with one agent. ``on_turn`` hooks run after every turn (topics, limits)."""

    def __init__(self, agent: Agent, conversation: Conversation, *, agent_timeout: float = 60.0,
                 deadline: float | None = None, redact: Callable[[str], str] = str,
                 tool_stubs: stubs.ToolStubs | None = None, traces: tuple[int, float] | None = None,
                 voice: VoiceTurns | None = None, decide: dict[str, DecisionKind] | None = None) -> None:
        self.agent = agent
        #: the decision every approval of a tool gets, whatever the user said (``--fabtest-fault TOOL=reject``)
        self.decide = decide or {}
        #: a voice scenario: each turn spoken and heard (:mod:`fabtest.engine.voice`); None: text
        self.voice = voice
        #: the trace receiver's port and the seconds a turn waits for its spans (agents with ``traces = true``)
        self.traces = traces
        #: the scenario's tool stubs, active during every agent call (:mod:`fabtest.agents.stubs`)
        self.tool_stubs = tool_stubs
        self.conversation = conversation
        self.agent_timeout = agent_timeout
        #: applied to everything logged, so secret values (playbook ``env``) never reach a log
        self.redact = redact
        #: time.monotonic() by which the whole scenario must end (--fabtest-scenario-timeout)
        self.deadline = deadline
        self.on_turn: list[TurnHook] = []

    def say(self, text: str, attachments: tuple[Attachment, ...] = (), decisions: tuple[Decision, ...] = (), *,
            interrupt_after_ms: float | None = None, silent_s: float | None = None) -> Turn:
        """Send one user message (with its files, and its decisions on the pauses the agent waits on)
        and record the turn. In a voice scenario the message is spoken; ``interrupt_after_ms`` cuts
        the reply short (barge-in) and ``silent_s`` sends that much silence instead of words."""
        if self.decide and decisions:
            decisions = forced_decisions(decisions, self.conversation.pending_pauses, self.decide)
        messages = [*self.conversation.messages, Message("user", text, attachments, decisions=decisions)]
        started = time.perf_counter()
        timeout = self.agent_timeout
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise ScenarioTimeout("the scenario exceeded its time limit (--fabtest-scenario-timeout)")
            timeout = min(timeout, remaining)
        with tracing.turn_span(len(self.conversation.turns) + 1) as span:
            turn = self._turn(text, messages, timeout, started, attachments, decisions,
                              voice={"interrupt_after_ms": interrupt_after_ms, "silent_s": silent_s})
            tracing.set_attribute(span, "fabtest.topic", turn.topic)
        return turn

    def _turn(self, text: str, messages: list[Message], timeout: float, started: float,
              attachments: tuple[Attachment, ...] = (), decisions: tuple[Decision, ...] = (),
              voice: dict[str, Any] | None = None) -> Turn:
        spoken: VoiceTurn | None = None
        took: float | None = None
        try:
            if self.voice is not None:
                if attachments:
                    raise UsageError("a voice scenario cannot send files: the user speaks (docs/how-to/voice.md)")
                response, spoken, took = self._voice_turn(text, timeout, voice or {})
            else:
                response = call_agent(self.agent, messages, timeout=timeout, tool_stubs=self.tool_stubs,
                                      traces=self.traces)
        except AgentTimeout:
            if timeout < self.agent_timeout:
                raise ScenarioTimeout("the scenario exceeded its time limit (--fabtest-scenario-timeout) "
                                      "while waiting for the agent") from None
            raise
        turn = Turn(number=len(self.conversation.turns) + 1, user=text, response=response,
                    duration_s=time.perf_counter() - started if took is None else took,  # a voice turn: the agent's
                    attachments=attachments, decisions=decisions, voice=spoken)
        self.conversation.turns.append(turn)
        if log.isEnabledFor(logging.INFO):
            tools = ", ".join(c.name for c in response.tool_calls)
            files = "".join(f"  [file: {a.name}]" for a in attachments)
            decided = "".join(f"  [{describe_decision(d)}]" for d in decisions)
            log.info("turn %d user: %s%s%s", turn.number, self.redact(text), files, self.redact(decided))
            paused = "".join(f"  [{describe_pause(p)}]" for p in response.pauses)
            log.info("turn %d agent: %s%s%s", turn.number, self.redact(response.text),
                     self.redact(f"  [tools: {tools}]") if tools else "", self.redact(paused))
        for hook in self.on_turn:
            hook(turn)
        return turn

    def _voice_turn(self, text: str, timeout: float,
                    options: dict[str, Any]) -> tuple[AgentResponse, VoiceTurn, float]:
        """One spoken turn with the scenario's tool stubs active; a timed-out agent is asked to cancel().
        Its duration is the agent's reply alone: speaking and hearing are fabtest's work, not latency."""
        assert self.voice is not None
        with tracing.agent_span(self.agent) as record, stubs.session(self.tool_stubs) as recorded:
            try:
                response, spoken, took = self.voice.take(self.agent, text, timeout=timeout,
                                                         turn=len(self.conversation.turns) + 1, **options)
            except AgentTimeout:
                cancel_agent(self.agent)
                raise
            if recorded:
                response.tool_calls = merge_tool_calls(response.tool_calls, list(recorded))
            record(response)
        return response, spoken, took


def call_agent(agent: Agent, messages: list[Message], *, timeout: float,
               tool_stubs: stubs.ToolStubs | None = None, traces: tuple[int, float] | None = None) -> AgentResponse:
    """:func:`_call_agent` inside the agent call's span (with ``--fabtest-otel``), with the scenario's
    tool stubs active; the calls recorded on fabtest's side (stubbed calls, ``@fabtest.tool``
    functions) are merged with the ones the agent returned or reported (one call counts once), and
    so are the calls in the agent's own spans when it exports them (:mod:`fabtest.agents.trace_calls`)."""
    port, wait = traces or (trace_calls.DEFAULT_PORT, trace_calls.DEFAULT_WAIT_S)
    with (tracing.agent_span(agent) as record, stubs.session(tool_stubs) as recorded,
          trace_calls.turn(agent, port=port, wait=wait) as seen):
        response = _call_agent(agent, messages, timeout=timeout)
        if recorded:
            response.tool_calls = merge_tool_calls(response.tool_calls, list(recorded))
        seen(response)
        record(response)
    return response


def _call_agent(agent: Agent, messages: list[Message], *, timeout: float) -> AgentResponse:
    """Call ``agent.chat`` so a hung agent becomes an AgentTimeout, not a hung suite.

    A sync ``chat`` runs on a worker thread that is abandoned at the timeout; an ``async def chat``
    runs on the shared agent loop (:mod:`fabtest.agents.aio`) and is cancelled at the timeout. An
    agent whose ``chat`` takes ``on_tool_call`` gets a callback; calls reported through it and
    calls returned in the response are merged (one call reported both ways counts once). Whatever
    comes back is validated at :mod:`fabtest.agents.boundary`.
    """
    reported: list[ToolCall] = []
    problems: list[AgentError] = []
    lock = threading.Lock()
    done = threading.Event()

    def on_tool_call(call: Any) -> None:
        with lock:
            if done.is_set():
                return  # a late report from an agent that already timed out
            try:
                reported.append(coerce_tool_call(call, where=f"on_tool_call(call #{len(reported) + 1})"))
            except AgentError as exc:  # kept until chat returns: the agent may swallow what we raise
                problems.append(exc)

    chat = getattr(agent, "chat", None)
    if chat is None and is_voice_agent(agent):
        raise UsageError("the agent speaks only audio (it has respond(audio) and no chat): mark the scenario @voice "
                         "or set voice = true in [tool.fabtest] (docs/how-to/voice.md)")
    kwargs = {"on_tool_call": on_tool_call} if accepts_keyword(chat, "on_tool_call") else {}
    try:
        if aio.is_async_callable(chat):
            value = _chat_on_loop(chat, messages, kwargs, timeout)
        else:
            value = _chat_on_thread(chat, messages, kwargs, timeout)
    except TimeoutError:
        with lock:
            done.set()
        cancel_agent(agent)
        raise AgentTimeout(f"the agent did not answer within {timeout:g}s (agent_timeout)") from None
    with lock:
        done.set()
    response = coerce_response(value)
    if problems:
        raise AgentDataError(f"the agent reported bad data: {problems[0]}")
    if reported:
        response.tool_calls = merge_tool_calls(response.tool_calls, reported)
    return response


#: the threads sync agents' turns run on (a turn that timed out keeps its thread until it returns)
_AGENT_THREADS = ReusableThreads("fabtest-agent", start_here=True)


def _chat_on_thread(chat: Any, messages: list[Message], kwargs: dict[str, Any], timeout: float) -> Any:
    """A sync ``chat`` on a daemon thread; TimeoutError leaves the thread behind (Python cannot stop it)."""
    box: dict[str, Any] = {}
    started, finished = threading.Event(), threading.Event()

    def _run() -> None:
        started.set()
        try:
            box["value"] = guarded("the agent raised", chat, messages, **kwargs)
        except BaseException as exc:  # re-raised on the caller's thread below
            box["error"] = exc
        finally:
            finished.set()

    # in a copy of the caller's context: the scenario's captured output, a tracing span
    _AGENT_THREADS.submit(contextvars.copy_context().run, _run)
    started.wait()  # the agent's time starts when it runs, not while a thread is being started for it
    if not finished.wait(timeout):
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _chat_on_loop(chat: Any, messages: list[Message], kwargs: dict[str, Any], timeout: float) -> Any:
    """An ``async def chat`` on the shared agent loop; TimeoutError after the task was cancelled."""
    return aio.run(guarded_async("the agent raised", chat(messages, **kwargs)), timeout=timeout)


def cancel_agent(agent: Any) -> None:
    """Ask an agent that ran out of time to stop what it started (a CLI's process group); its own
    failure to do so is not the scenario's story, the timeout is."""
    cancel = getattr(agent, "cancel", None)
    if callable(cancel):
        try:
            if aio.is_async_callable(cancel):
                aio.run(guarded_async("the agent's cancel() raised", cancel()), timeout=CANCEL_TIMEOUT_S)
            else:
                guarded("the agent's cancel() raised", cancel)
        except TimeoutError:
            log.warning("the agent's cancel() did not finish within %gs after a timeout", CANCEL_TIMEOUT_S)
        except AgentError:
            log.warning("the agent's cancel() failed after a timeout", exc_info=True)
