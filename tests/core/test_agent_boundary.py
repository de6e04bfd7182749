"""The agent boundary: what an agent returns, reports or raises becomes plain data or an AgentError
naming the field; ``on_tool_call`` is passed and merged; the guard keeps the agent's own frames."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from fabtest.agents.base import AgentError, AgentTimeout, agent_metadata
from fabtest.agents.boundary import (
    AgentDataError,
    agent_traceback,
    coerce_response,
    coerce_tool_call,
    guarded,
    merge_tool_calls,
)
from fabtest.conversation import AgentResponse, Message, ToolCall
from fabtest.engine.turns import call_agent

HI = [Message("user", "hi")]


# -- tool-call shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    {"name": "search", "arguments": {"city": "Berlin"}},
    {"name": "search", "arguments": '{"city": "Berlin"}'},
    {"name": "search", "args": {"city": "Berlin"}},
    {"name": "search", "args": '{"city": "Berlin"}'},
    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"city": "Berlin"}'}},
    ToolCall("search", {"city": "Berlin"}),
])
def test_common_tool_call_shapes_are_accepted(raw: Any) -> None:
    call = coerce_tool_call(raw)
    assert (call.name, call.arguments) == ("search", {"city": "Berlin"})


def test_result_output_and_openai_id_are_kept() -> None:
    assert coerce_tool_call({"name": "a", "arguments": {}, "result": [1]}).result == [1]
    assert coerce_tool_call({"name": "a", "args": {}, "output": "done"}).result == "done"
    openai = coerce_tool_call({"id": "call_9", "type": "function", "function": {"name": "a", "arguments": ""}})
    assert openai.arguments == {} and openai.metadata == {"id": "call_9"}


@pytest.mark.parametrize(("raw", "named"), [
    (5, "tool_calls[0]: expected a ToolCall or a mapping"),
    (ToolCall(5, {}), "tool_calls[0].name"),  # type: ignore[arg-type]
    ({"name": "", "arguments": {}}, "tool_calls[0].name"),
    ({"name": "a", "arguments": "[1, 2"}, "tool_calls[0].arguments: not valid JSON"),
    ({"name": "a", "arguments": [1, 2]}, "tool_calls[0].arguments"),
    ({"function": {"name": "a", "arguments": "{oops"}}, "tool_calls[0].function.arguments: not valid JSON"),
    (ToolCall("a", {}, metadata="fast"), "tool_calls[0].metadata"),  # type: ignore[arg-type]
    ({"name": "a", "arguments": {}, "surprise": 1}, "tool_calls[0].name"),  # unknown keys are ignored...
])
def test_bad_tool_calls_name_the_field(raw: Any, named: str) -> None:
    if isinstance(raw, dict) and "surprise" in raw:  # ...so this one is fine
        assert coerce_tool_call(raw).name == "a"
        return
    with pytest.raises(AgentDataError) as info:
        coerce_tool_call(raw)
    assert named in str(info.value)


@pytest.mark.parametrize(("value", "named"), [
    (AgentResponse(text="ok", tool_calls="notalist"), "tool_calls: expected a list"),  # type: ignore[arg-type]
    (AgentResponse(text=3), "text: expected a string"),  # type: ignore[arg-type]
    (AgentResponse(text="ok", metadata=["m"]), "metadata: expected a mapping"),  # type: ignore[arg-type]
    (AgentResponse(text="ok", tool_calls=[ToolCall(5, {})]), "tool_calls[0].name"),  # type: ignore[arg-type]
    (AgentResponse(text="ok", tool_calls=[{"name": "a", "arguments": {}}, 7]), "tool_calls[1]"),
    (42, "agent returned int (42)"),
    (None, "agent returned NoneType"),
])
def test_bad_responses_name_the_field(value: Any, named: str) -> None:
    with pytest.raises(AgentDataError) as info:
        coerce_response(value)
    assert named in str(info.value)
    assert "raised" not in str(info.value)  # bad data is named as such, not blamed as an exception


def test_responses_become_plain_json_data() -> None:
    class Model:
        def __str__(self) -> str:
            return "model-x"

    response = coerce_response({"text": "ok", "tool_calls": [{"name": "a", "args": {"when": Model()}}],
                                "metadata": {"model": Model(), "latency_ms": 12}})
    assert response.metadata == {"model": "model-x", "latency_ms": 12}
    assert response.tool_calls[0].arguments == {"when": "model-x"}
    json.dumps(response.metadata)


# -- metadata and the guard --------------------------------------------------------------------------


class _Meta:
    def __init__(self, value: Any) -> None:
        self.value = value

    def metadata(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_metadata_is_guarded_and_validated() -> None:
    assert agent_metadata(_Meta({"model": "m"})) == {"model": "m"}
    assert agent_metadata(_Meta(None)) == {}
    assert agent_metadata(object()) == {}
    with pytest.raises(AgentError, match=r"metadata\(\) raised KeyError"):
        agent_metadata(_Meta(KeyError("k")))
    with pytest.raises(AgentDataError, match=r"metadata\(\): expected a mapping, got str"):
        agent_metadata(_Meta("not a dict"))


def _users_failing_line() -> None:
    raise ValueError("database is down")


def test_guard_chains_the_users_exception_and_shows_only_its_frames() -> None:
    with pytest.raises(AgentError) as info:
        guarded("the agent raised", _users_failing_line)
    assert str(info.value) == "the agent raised ValueError: database is down"
    frames = agent_traceback(info.value)
    assert frames is not None and "_users_failing_line" in frames and "database is down" in frames
    assert "fabtest/agents/boundary.py" not in frames


def test_guard_passes_fabtest_errors_and_catches_system_exit() -> None:
    with pytest.raises(AgentTimeout):
        guarded("x", lambda: (_ for _ in ()).throw(AgentTimeout("slow")))
    with pytest.raises(AgentError, match="SystemExit"):
        guarded("the agent raised", lambda: exit(3))


# -- on_tool_call ---------------------------------------------------------------------------------------


class _Reporter:
    """Reports calls through the callback only."""

    def chat(self, messages: list[Message], on_tool_call: Any = None) -> AgentResponse:
        on_tool_call({"name": "search", "arguments": {"city": "Berlin"}})
        on_tool_call(ToolCall("book", {"id": 1}))
        return AgentResponse("booked")


class _Both:
    """Reports one call through the callback (from another thread) and returns it too, plus one more."""

    def chat(self, messages: list[Message], on_tool_call: Any = None) -> AgentResponse:
        worker = threading.Thread(target=on_tool_call, args=(ToolCall("search", {"city": "Berlin"}, result=[1]),))
        worker.start()
        worker.join()
        return AgentResponse("ok", [ToolCall("search", {"city": "Berlin"}, metadata={"latency_ms": 5}),
                                    ToolCall("search", {"city": "Paris"})])


class _Plain:
    def chat(self, messages: list[Message]) -> str:
        return f"plain: {messages[-1].content}"


class _BadReporter:
    def chat(self, messages: list[Message], on_tool_call: Any = None) -> str:
        on_tool_call({"arguments": {}})  # no name
        return "ok"


def test_calls_reported_through_the_callback_are_recorded() -> None:
    response = call_agent(_Reporter(), HI, timeout=5)
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("search", {"city": "Berlin"}), ("book", {"id": 1})]


def test_a_call_reported_both_ways_counts_once() -> None:
    response = call_agent(_Both(), HI, timeout=5)
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("search", {"city": "Berlin"}),
                                                                     ("search", {"city": "Paris"})]
    assert response.tool_calls[0].result == [1] and response.tool_calls[0].metadata == {"latency_ms": 5}


def test_a_plain_chat_agent_gets_no_callback() -> None:
    assert call_agent(_Plain(), HI, timeout=5).text == "plain: hi"


def test_bad_data_through_the_callback_names_it() -> None:
    with pytest.raises(AgentDataError, match=r"on_tool_call\(call #1\)\.name"):
        call_agent(_BadReporter(), HI, timeout=5)


def test_merge_pairs_calls_by_id_first() -> None:
    returned = [ToolCall("a", {"x": 1}, metadata={"id": "1"}), ToolCall("a", {"x": 1}, metadata={"id": "2"})]
    reported = [ToolCall("a", {"x": 1}, result="r2", metadata={"id": "2"})]
    merged = merge_tool_calls(returned, reported)
    assert [c.result for c in merged] == [None, "r2"]


def test_only_a_users_metadata_runs_on_a_bounding_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """fabtest's adapters' metadata() is called directly (a thread per scenario cost milliseconds);
    a user's, including a subclass overriding an adapter's, stays bounded by the timeout."""
    import threading

    from fabtest.agents.boundary import safe_metadata
    from fabtest.agents.python import CallableAgent

    seen: list[str] = []

    class Mine(CallableAgent):
        def metadata(self) -> dict[str, str]:
            seen.append(threading.current_thread().name)
            return {"who": "user"}

    class Plain(CallableAgent):
        pass

    assert safe_metadata(Mine(lambda m: "hi"), timeout=5) == {"who": "user"}
    assert seen == ["fabtest-agent-hook"]
    import fabtest.agents.boundary as boundary

    def no_thread(*args: object) -> None:
        raise AssertionError("fabtest's own metadata() was sent to a thread")

    monkeypatch.setattr(boundary, "_within", no_thread)
    assert safe_metadata(Plain(lambda m: "hi"), timeout=5)["callable"].endswith("<lambda>")
    with pytest.raises(AssertionError, match="sent to a thread"):
        safe_metadata(Mine(lambda m: "hi"), timeout=5)
