"""The A2A adapter against an agent built with a2a-sdk's own server, on 127.0.0.1 in this process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("a2a.server", reason="needs the a2a extra: pip install 'pytest-fabtest[a2a]'")

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a_weather import PNG, WeatherExecutor, app, card
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from support.asgi import serve
from talk import Conversation

from fabtest.agents.base import AgentError
from fabtest.agents.registry import make_agent
from fabtest.conversation import Attachment, Decision, Message
from fabtest.engine.preflight import config_problem, reachability_problem
from fabtest.errors import UsageError

BAD_CARDS = {
    "/broken/card.json": PlainTextResponse("{not json"),
    "/unparsable/card.json": JSONResponse({"name": "X", "capabilities": {"streaming": "very"}}),
    "/nameless/card.json": JSONResponse({"description": "who am I", "supportedInterfaces": [
        {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}]}),
    "/grpc/card.json": JSONResponse({"name": "G", "supportedInterfaces": [
        {"url": "127.0.0.1:9", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]}),
}


#: the JSON-RPC methods the server was called with, in order
METHODS: list[str] = []


def legacy_card(url: str) -> dict[str, Any]:
    """An A2A 0.3 card (``url``, ``protocolVersion``) for the same agent, served at /v03."""
    return {"name": "Weather 0.3", "description": "the same agent over A2A 0.3", "version": "1", "url": f"{url}/v03",
            "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC", "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, WeatherExecutor]]:
    executor = WeatherExecutor()

    def build(url: str) -> Any:
        weather = app(url, executor)
        for path, reply in {**BAD_CARDS, "/v03/card.json": JSONResponse(legacy_card(url))}.items():
            weather.routes.insert(0, Route(path, lambda request, reply=reply: reply))
        handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card(url))
        weather.routes[0:0] = create_jsonrpc_routes(handler, "/v03", enable_v0_3_compat=True)

        async def record_methods(request: Request, call_next: Any) -> Any:
            if request.method == "POST":
                METHODS.append(json.loads(await request.body()).get("method"))
            return await call_next(request)

        weather.add_middleware(BaseHTTPMiddleware, dispatch=record_methods)
        return weather

    with serve(build) as url:
        yield url, executor


def talk_to(url: str, **options: Any) -> Conversation:
    """A scenario with the agent at ``url``: ``{a2a = url, ...options}``."""
    return Conversation({"a2a": url, **options})


@pytest.mark.parametrize(("version", "streaming", "method"), [
    ("1.0", True, "SendStreamingMessage"), ("1.0", False, "SendMessage"),
    ("0.3", True, "message/stream"), ("0.3", False, "message/send")])
def test_a_task_gives_its_artifact_as_text_and_files_and_its_tool_calls(server: Any, version: str, streaming: bool,
                                                                         method: str) -> None:
    url, _ = server
    talk = talk_to(url, streaming=streaming, **({"card": "/v03/card.json"} if version == "0.3" else {}))
    response = talk.say("weather in Paris")
    talk.close()
    assert METHODS[-1] == method
    assert response.text == "Sunny in Paris, 21 degrees."  # three streamed chunks of one artifact
    assert [f.name for f in response.attachments] == ["sky.png"]
    assert response.attachments[0].data == PNG and response.attachments[0].mime_type == "image/png"
    (call,) = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("get_weather", {"city": "Paris"},
                                                        {"sky": "sunny", "celsius": 21})
    assert talk.reported == [call]
    assert response.metadata["task_state"] == "completed" and response.metadata["artifacts"] == ["forecast"]
    assert talk.agent.metadata()["agent"] == ("Weather agent" if version == "1.0" else "Weather 0.3")


def test_one_context_per_scenario_kept_across_its_turns(server: Any) -> None:
    url, executor = server
    first = talk_to(url)
    assert first.say("hello").text == "Hello! Message 1 in this context."
    assert first.say("hello again").text == "Hello! Message 2 in this context."
    second = talk_to(url)  # the next scenario
    assert second.say("hello").text == "Hello! Message 1 in this context."
    contexts = [m.context_id for m in executor.received[-3:]]  # as the server's request context saw them
    assert contexts[0] == contexts[1] == first.agent.context_id != contexts[2] == second.agent.context_id
    first.close()
    second.close()


def test_input_required_with_a_call_is_an_approval_decided_in_the_same_task(server: Any) -> None:
    url, executor = server
    talk = talk_to(url)
    asked = talk.say("refund 80")
    assert asked.text == "Refund 80 euros: do you approve?"
    assert asked.metadata["task_state"] == "input-required"
    assert asked.tool_calls == [] and talk.reported == []  # asked, not made
    (pause,) = asked.pauses
    assert (pause.kind, pause.tool, pause.arguments, pause.question, pause.id) == (
        "approval", "refund", {"amount": 80}, "Refund 80 euros: do you approve?", "r1")
    task_id = asked.metadata["task_id"]
    done = talk.say("", decisions=[Decision("r1", "approved")])
    assert done.text == "The refund is issued." and done.metadata["task_state"] == "completed"
    assert executor.received[-1].task_id == task_id  # the answer continued the waiting task
    assert executor.received[-1].parts[0].text == "Approved."
    assert executor.decisions[-1] == [{"decision": "approved", "approved": True}]
    (call,) = done.tool_calls  # the approved call is made in the turn that approved it
    assert (call.name, call.arguments, call.result) == ("refund", {"amount": 80}, {"status": "approved"})
    after = talk.say("weather in Oslo")  # a finished task is not continued
    assert executor.received[-1].task_id == after.metadata["task_id"] != task_id
    talk.close()


def test_a_rejection_carries_its_reason_and_makes_no_call(server: Any) -> None:
    url, executor = server
    talk = talk_to(url)
    talk.say("refund 30")
    done = talk.say("", decisions=[Decision("r1", "rejected", reason="no receipt")])
    assert done.text == "No refund, as you said: Rejected: no receipt" and done.tool_calls == []
    assert executor.decisions[-1] == [{"decision": "rejected", "approved": False, "reason": "no receipt"}]
    talk.close()


def test_input_required_without_a_call_is_a_question_answered_in_words(server: Any) -> None:
    url, _ = server
    talk = talk_to(url)
    (pause,) = talk.say("book").pauses
    assert (pause.kind, pause.question, pause.tool) == ("question", "Which date?", None)
    answer = Decision(pause.id, "answered", answer="12 March")
    assert talk.say("12 March", decisions=[answer]).text == "Booked for 12 March."
    talk.close()


def test_the_users_files_go_as_raw_parts(server: Any) -> None:
    url, executor = server
    talk = talk_to(url)
    lamp = Attachment.from_bytes(PNG, name="lamp.png")
    assert talk.say("hello", lamp).text == "Hello! Message 1 in this context and got lamp.png."
    raw = [p for p in executor.received[-1].parts if p.WhichOneof("content") == "raw"]
    assert [(p.raw, p.media_type) for p in raw] == [(PNG, "image/png")]
    talk.close()


@pytest.mark.parametrize(("said", "expected"), [
    ("fail", "the task failed: the weather service is down"),
    ("login", "the task needs authentication (auth-required), which fabtest cannot give: sign in at /login"),
])
def test_a_failed_task_is_the_agents_error_in_one_line(server: Any, said: str, expected: str) -> None:
    url, _ = server
    talk = talk_to(url)
    with pytest.raises(AgentError) as err:
        talk.say(said)
    assert str(err.value) == f"A2A agent at {url}: {expected}"
    talk.close()


@pytest.mark.parametrize(("card", "expected"), [
    ("/broken/card.json", "the agent card at {url}/broken/card.json is not JSON: '{{not json'"),
    ("/unparsable/card.json", "the agent card at {url}/unparsable/card.json does not parse: "),
    ("/nameless/card.json", "the agent card at {url}/nameless/card.json has no name"),
    ("/grpc/card.json", "its card offers GRPC; fabtest speaks JSONRPC and HTTP+JSON"),
    ("/missing.json", "no agent card at {url}/missing.json (HTTP 404); set card = \"PATH\""),
])
def test_a_bad_card_is_one_line_naming_the_cause(server: Any, card: str, expected: str) -> None:
    url, _ = server
    talk = talk_to(url, card=card)
    with pytest.raises(AgentError) as err:
        talk.say("hello")
    assert str(err.value).startswith(f"A2A agent at {url}: " + expected.format(url=url)), str(err.value)
    assert "\n" not in str(err.value)
    problem = reachability_problem("[tool.fabtest.agents] weather", {"a2a": url, "card": card})
    assert problem is not None and expected.format(url=url)[:30] in problem  # the pre-flight says it first


def test_an_unreachable_agent_is_one_line() -> None:
    talk = talk_to("http://127.0.0.1:9")
    with pytest.raises(AgentError, match=r"^A2A agent at http://127.0.0.1:9 unreachable: ConnectError"):
        talk.say("hello")
    assert "the A2A agent at http://127.0.0.1:9 does not accept connections" in (
        reachability_problem("w", {"a2a": "http://127.0.0.1:9"}) or "")


def test_a_misspelt_key_or_bad_value_is_refused_before_the_run() -> None:
    assert "unknown key 'streamin' in an A2A agent table (did you mean 'streaming'?)" in (
        config_problem("w", {"a2a": "http://x", "streamin": False}) or "")
    with pytest.raises(UsageError, match="a2a must be the agent's base URL"):
        make_agent({"a2a": "localhost:9999"}, {}, where="w")
    assert "timeout must be a positive number" in (config_problem("w", {"a2a": "http://x", "timeout": 0}) or "")


def test_a_conversation_given_so_far_opens_the_context_as_text(server: Any) -> None:
    url, executor = server
    talk = talk_to(url)
    talk.messages = [Message("user", "I live in Oslo"), Message("agent", "Noted.")]  # Given the conversation so far
    talk.say("weather in Oslo")
    first, second = executor.received[-1].parts[:2]
    assert first.text == "The conversation so far:\nUser: I live in Oslo\nAgent: Noted."
    assert second.text == "weather in Oslo"
    talk.close()
