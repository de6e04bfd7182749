"""Files through the framework adapters (issue 39), each on the real framework in-process: the user's
files reach the model in the framework's own form (ADK ``inline_data`` parts, LangChain content
blocks, the Agents SDK's ``input_image``/``input_file``, PydanticAI ``BinaryContent``), and the files a
reply carries in that form come back as the turn's attachments."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from fabtest.agents import aio
from fabtest.conversation import Attachment, Message
from fabtest.testing import FakeGemini

from .helpers import build, provide

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LAMP = Attachment.from_bytes(PNG, name="lamp.png")
NOTE = Attachment.from_bytes(b"receipt: 12 EUR", name="note.txt")


def _send(agent: Any, *files: Attachment) -> Any:
    return aio.run(agent.chat([Message("user", "is this covered?", files)]), timeout=60)


def test_adk_sends_inline_data_parts_and_reads_them_back(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.adk")
    from google.adk.agents import LlmAgent
    from google.genai import types

    from fabtest.agents.adk import _inline_files

    fake.add_rule(r".", text="a lamp")
    agent = LlmAgent(name="shop", model="gemini-2.5-flash", instruction="Look at photos.")
    provide(monkeypatch, "adk_files", root_agent=agent)
    response = _send(build("adk", "adk_files:root_agent"), LAMP, NOTE)
    parts = fake.requests[-1].contents[-1]["parts"]
    assert parts[0] == {"text": "is this covered?"}
    blob = parts[1]["inlineData"]
    assert (blob.get("mimeType") or blob.get("mime_type")) == "image/png"  # google-genai's wire spelling varies
    assert base64.b64decode(blob["data"]) == PNG and response.text == "a lamp"
    assert parts[2] == {"text": "receipt: 12 EUR"}  # ADK itself turns a text/plain inline part into text
    [back] = _inline_files([types.Part(text="x"), types.Part.from_bytes(data=PNG, mime_type="image/png")], 0)
    assert (back.name, back.sha256) == ("file-1.png", LAMP.sha256)


def test_langgraph_sends_content_blocks_and_reads_image_blocks_back(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    seen: list[Any] = []

    def model(state: Any) -> Any:
        seen.append(state["messages"][-1].content)
        return {"messages": [AIMessage(content=[{"type": "text", "text": "drawn"},
                                                {"type": "image", "base64": base64.b64encode(PNG).decode(),
                                                 "mime_type": "image/png"}])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    provide(monkeypatch, "lg_files", graph=builder.compile())
    response = _send(build("langgraph", "lg_files:graph"), LAMP, NOTE)
    [content] = seen
    assert content[0] == {"type": "text", "text": "is this covered?"}
    assert (content[1]["type"], content[1]["mime_type"]) == ("image", "image/png")
    assert (content[2]["type"], content[2]["extras"]) == ("file", {"filename": "note.txt"})
    assert base64.b64decode(content[2]["base64"]) == NOTE.data
    assert response.text == "drawn"
    [back] = response.attachments
    assert (back.name, back.mime_type, back.data) == ("image-1.png", "image/png", PNG)


def test_openai_agents_sends_input_image_and_input_file(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
    from builtin_agent.fake_openai import FakeOpenAI, message
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    with FakeOpenAI(lambda body: (200, message("a lamp"))) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="shop", model=OpenAIChatCompletionsModel(model="gpt-4.1-mini", openai_client=client))
        provide(monkeypatch, "oa_files", agent=agent)
        response = _send(build("openai_agents", "oa_files:agent"), LAMP, NOTE)
        content = server.requests[-1]["messages"][-1]["content"]
    assert response.text == "a lamp"
    assert [p["type"] for p in content] == ["text", "image_url", "file"]  # the SDK's chat-completions form
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert content[2]["file"]["filename"] == "note.txt"


def test_pydantic_ai_sends_binary_content(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[Any] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages[-1].parts[-1].content)
        return ModelResponse(parts=[TextPart("a lamp")])

    provide(monkeypatch, "pa_files", agent=Agent(FunctionModel(reply, model_name="gemini-2.5-flash")))
    response = _send(build("pydantic_ai", "pa_files:agent"), LAMP, NOTE)
    [content] = seen
    assert content[0] == "is this covered?" and response.text == "a lamp"
    assert all(isinstance(c, BinaryContent) for c in content[1:])
    assert [(c.media_type, c.identifier, c.data) for c in content[1:]] == [("image/png", "lamp.png", PNG),
                                                                          ("text/plain", "note.txt", NOTE.data)]
