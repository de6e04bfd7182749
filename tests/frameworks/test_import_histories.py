"""``fabtest import`` of the histories LangChain and ADK save (issue 40 item 3), each produced by the
framework's own classes and dump functions: every dump reads to the same turns, tool calls with
their arguments and results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.authoring.transcripts import read_conversation
from fabtest.cli import main


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")


def _turns(path: Path) -> list[tuple[str, str, list[tuple[str, dict[str, Any], Any]]]]:
    recorded = read_conversation(path)
    return [(t.user, t.agent, [(c.name, c.arguments, c.result) for c in t.tool_calls]) for t in recorded.turns]


EXPECTED = [("How much is green tea?", "Green tea costs 4.5 EUR.",
             [("get_price", {"item": "green tea"}, {"price": 4.5, "currency": "EUR"})]),
            ("Thanks", "You're welcome.", [])]


def _langchain_messages() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    return [SystemMessage("You sell tea."), HumanMessage("How much is green tea?"),
            AIMessage("", tool_calls=[{"name": "get_price", "args": {"item": "green tea"}, "id": "call_1"}]),
            ToolMessage('{"price": 4.5, "currency": "EUR"}', tool_call_id="call_1", name="get_price"),
            AIMessage("Green tea costs 4.5 EUR."), HumanMessage("Thanks"), AIMessage("You're welcome.")]


@pytest.mark.parametrize("dump", ["messages_to_dict", "model_dump", "dumpd", "graph_state"])
def test_langchain_message_lists(tmp_path: Path, dump: str) -> None:
    _needs("langchain_core")
    from langchain_core.load import dumpd
    from langchain_core.messages import messages_to_dict

    messages = _langchain_messages()
    data: Any = {"messages_to_dict": lambda: messages_to_dict(messages),
                 "model_dump": lambda: [m.model_dump() for m in messages],
                 "dumpd": lambda: [dumpd(m) for m in messages],
                 "graph_state": lambda: {"messages": messages_to_dict(messages)}}[dump]()
    saved = tmp_path / "lc.json"
    saved.write_text(json.dumps(data), encoding="utf-8")
    assert read_conversation(saved).source_format == "langchain"
    assert _turns(saved) == EXPECTED
    assert read_conversation(saved).skipped == 1  # the system message


def _adk_session() -> Any:
    from google.adk.events import Event
    from google.adk.sessions import Session
    from google.genai import types

    def event(author: str, *parts: types.Part) -> Event:
        return Event(author=author, invocation_id="inv", content=types.Content(
            role="user" if author == "user" else "model", parts=list(parts)))

    call = types.FunctionCall(id="adk-1", name="get_price", args={"item": "green tea"})
    answer = types.FunctionResponse(id="adk-1", name="get_price", response={"price": 4.5, "currency": "EUR"})
    return Session(id="s1", app_name="shop", user_id="u", state={"cart": []}, events=[
        event("user", types.Part(text="How much is green tea?")), event("shop", types.Part(function_call=call)),
        event("shop", types.Part(function_response=answer)), event("shop", types.Part(text="Green tea costs 4.5 EUR.")),
        event("user", types.Part(text="Thanks")), event("shop", types.Part(text="You're welcome."))])


@pytest.mark.parametrize("alias", [False, True])
def test_adk_session_events(tmp_path: Path, alias: bool) -> None:
    _needs("google.adk")
    saved = tmp_path / "session.json"
    saved.write_text(json.dumps(_adk_session().model_dump(mode="json", by_alias=alias)), encoding="utf-8")
    assert read_conversation(saved).source_format == "adk"
    assert _turns(saved) == EXPECTED


def test_the_command_writes_the_feature_with_the_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _needs("langchain_core")
    from langchain_core.messages import messages_to_dict

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text(json.dumps(messages_to_dict(_langchain_messages())), encoding="utf-8")
    assert main(["import", "chat.json", "--format", "langchain"]) == 0
    assert "2 user turn(s), 1 tool call(s) asserted; 1 system or opening message(s) left out" in capsys.readouterr().out
    text = (tmp_path / "features" / "regressions" / "chat.feature").read_text()
    assert "(LangChain messages)" in text and 'Then the agent must call "get_price" with:' in text
