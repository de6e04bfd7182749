"""Async agents (issue 17 item 3): ``async def chat``, async factories and async ``around()`` run on
the one agent loop of :mod:`fabtest.agents.aio`; sync agents are unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fabtest.agents import aio
from fabtest.agents.base import AgentError, AgentTimeout
from fabtest.agents.registry import make_agent
from fabtest.conversation import AgentResponse, Message
from fabtest.engine.turns import call_agent

HI = [Message("user", "hi")]
_SPAN: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")


class LoopAgent:
    """Remembers the loop and task of every call, and the caller's context variable it saw."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.spans: list[str] = []

    async def chat(self, messages: list[Message]) -> AgentResponse:
        self.loops.append(asyncio.get_running_loop())
        self.spans.append(_SPAN.get())
        await asyncio.sleep(0)
        return AgentResponse(text=f"echo {messages[-1].content}")


def test_async_chat_runs_on_the_shared_loop_in_the_callers_context() -> None:
    agent = LoopAgent()
    token = _SPAN.set("scenario-1")
    try:
        assert call_agent(agent, HI, timeout=5).text == "echo hi"
    finally:
        _SPAN.reset(token)
    assert call_agent(agent, HI, timeout=5).text == "echo hi"
    assert agent.loops == [aio.loop(), aio.loop()]
    assert agent.spans == ["scenario-1", "none"]  # a copy of each caller's context, not the loop thread's


def test_several_async_chats_are_in_flight_on_one_loop_at_once() -> None:
    """A barrier on the loop that passes only when every caller's chat is in flight together."""
    callers = 4
    arrived: list[asyncio.AbstractEventLoop] = []
    gate: dict[str, asyncio.Event] = {}

    class BarrierAgent:
        async def chat(self, messages: list[Message]) -> str:
            gate.setdefault("all", asyncio.Event())
            arrived.append(asyncio.get_running_loop())
            if len(arrived) == callers:
                gate["all"].set()
            await asyncio.wait_for(gate["all"].wait(), 10)
            return "through"

    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(call_agent(BarrierAgent(), HI, timeout=20).text))
               for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == ["through"] * callers
    assert set(arrived) == {aio.loop()}


def test_the_agent_timeout_cancels_an_async_chat() -> None:
    cancelled = threading.Event()

    class Hanger:
        async def chat(self, messages: list[Message]) -> str:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "too late"

        async def cancel(self) -> None:
            self.cancel_called = True

    agent = Hanger()
    with pytest.raises(AgentTimeout, match=r"did not answer within 0\.2s"):
        call_agent(agent, HI, timeout=0.2)
    assert cancelled.wait(5), "the hung chat was not cancelled"
    assert agent.cancel_called  # an async cancel() is awaited too


def test_an_async_chat_that_raises_is_an_agent_error_with_its_exception_chained() -> None:
    class Raiser:
        async def chat(self, messages: list[Message]) -> str:
            raise ConnectionError("model endpoint down")

    with pytest.raises(AgentError, match="the agent raised ConnectionError: model endpoint down") as info:
        call_agent(Raiser(), HI, timeout=5)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_async_tool_call_reports_are_merged() -> None:
    class Tooly:
        async def chat(self, messages: list[Message], on_tool_call: Any = None) -> AgentResponse:
            on_tool_call({"name": "lookup", "arguments": {"q": "x"}})
            return AgentResponse(text="done")

    assert [c.name for c in call_agent(Tooly(), HI, timeout=5).tool_calls] == ["lookup"]


def test_an_async_factory_builds_its_client_on_the_loop_chat_runs_on() -> None:
    class Client:
        async def chat(self, messages: list[Message]) -> str:
            return "same loop" if asyncio.get_running_loop() is self.loop else "another loop"

    async def build_agent(context: dict[str, Any]) -> Client:
        client = Client()
        client.loop = asyncio.get_running_loop()  # type: ignore[attr-defined]
        return client

    agent = make_agent(build_agent, {"tenant": "t1"}, where="test")
    assert call_agent(agent, HI, timeout=5).text == "same loop"


def test_an_async_chat_callable_is_an_agent() -> None:
    async def chat(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        return f"async {len(messages)}"

    assert call_agent(make_agent(chat, {}, where="test"), HI, timeout=5).text == "async 1"


def test_an_async_context_manager_is_left_by_the_task_that_entered_it() -> None:
    tasks: list[asyncio.Task[Any] | None] = []

    @contextlib.asynccontextmanager
    async def around() -> AsyncIterator[None]:
        tasks.append(asyncio.current_task())
        yield
        tasks.append(asyncio.current_task())

    leave = aio.enter_async(around())
    assert len(tasks) == 1
    leave()
    assert len(tasks) == 2 and tasks[0] is tasks[1] and tasks[0] is not None


def test_an_async_context_manager_that_fails_on_exit_raises_on_the_callers_thread() -> None:
    @contextlib.asynccontextmanager
    async def around() -> AsyncIterator[None]:
        yield
        raise RuntimeError("could not close the session")

    leave = aio.enter_async(around())
    with pytest.raises(RuntimeError, match="could not close the session"):
        leave()


AGENT = '''
import asyncio
import contextlib
import json
import pathlib

EVENTS = pathlib.Path(__file__).with_name("events.jsonl")


def log(what):
    with EVENTS.open("a") as f:
        f.write(json.dumps([what, id(asyncio.get_running_loop())]) + "\\n")


class AsyncBot:
    @classmethod
    async def build(cls, context):
        log("build")
        return cls()

    @contextlib.asynccontextmanager
    async def around(self):
        log("enter")
        yield
        log("exit")

    async def chat(self, messages):
        log("chat")
        await asyncio.sleep(0)
        return "hello " + messages[-1].content
'''

FEATURE = '''
Feature: Async
  Scenario: An async agent answers
    When the user says "there"
    Then the response must match "hello there"

  Scenario: A second one gets a fresh agent
    When the user says "again"
    Then the response must match "hello again"
'''


def test_an_async_agent_runs_a_feature_with_around_and_a_fresh_agent_per_scenario(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                               '[tool.fabtest]\nagent = "asyncbot:AsyncBot"\nresults_dir = "results"\n')
    pytester.makepyfile(asyncbot=AGENT)
    pytester.path.joinpath("features").mkdir()
    pytester.path.joinpath("features", "async.feature").write_text(FEATURE)
    result = pytester.runpytest_subprocess("features", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    import json

    events = [json.loads(line) for line in pytester.path.joinpath("events.jsonl").read_text().splitlines()]
    assert [e[0] for e in events] == ["build", "enter", "chat", "exit"] * 2
    assert len({e[1] for e in events}) == 1  # one loop for every agent of the process
