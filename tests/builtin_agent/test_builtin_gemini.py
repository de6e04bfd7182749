"""The built-in agent on Gemini: the real google-genai client against FakeGemini issuing function calls."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from fabtest.agents.base import AgentError
from fabtest.agents.builtin import BuiltinAgent
from fabtest.agents.registry import make_agent
from fabtest.conversation import Message, ToolCall
from fabtest.errors import UsageError
from fabtest.llm.base import LLMNotConfigured
from fabtest.testing import FakeGemini

TOOLS_MODULE = '''
def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


def explode(reason: str) -> str:
    """Always raises."""
    raise RuntimeError(reason)


TOOLS = [add, explode]
'''


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "bt_tools.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("bt_tools", None)
    return "bt_tools:TOOLS"


def build(table: dict[str, Any], tmp_path: Path) -> BuiltinAgent:
    agent = make_agent({"gemini": "gemini-2.5-flash", **table}, {"agent_name": "helper", "rootdir": str(tmp_path)},
                       where="f.feature:3")
    assert isinstance(agent, BuiltinAgent)
    return agent


def test_python_tools_run_in_the_loop_and_every_call_is_recorded(fake: FakeGemini, tools_module: str,
                                                                  tmp_path: Path) -> None:
    fake.add_tool_script(r"sum", [
        {"name": "add", "args": {"a": "5"}},                       # the model sends a string: coerced to int
        [{"name": "explode", "args": {"reason": "kaboom"}}, {"name": "add", "args": {"a": 1, "b": 1}}],
        lambda req: "results: " + ", ".join(str(r["response"]) for r in req.function_responses),
    ])
    agent = build({"tools": tools_module, "instructions": "Be exact."}, tmp_path)
    seen: list[ToolCall] = []
    reply = agent.chat([Message("user", "What is the sum?")], on_tool_call=seen.append)

    assert [c.name for c in reply.tool_calls] == ["add", "explode", "add"]
    first, boom, second = reply.tool_calls
    assert first.arguments == {"a": "5"} and first.result == 7 and first.metadata["round"] == 1
    assert boom.result == "RuntimeError: kaboom" and boom.metadata["error"] is True
    assert second.result == 2 and second.metadata["round"] == 2
    assert seen == reply.tool_calls  # on_tool_call saw each call as it ran
    # the model got the error and the results back as function responses
    assert reply.text == "results: {'error': 'RuntimeError: kaboom'}, {'result': 2}"
    assert reply.metadata["usage"]["calls"] == 3 and reply.metadata["usage"]["input_tokens"] > 0
    assert reply.metadata["tool_rounds"] == 2
    request = fake.requests[0]
    assert request.system == "Be exact."
    assert request.tool_names == ["add", "explode"]
    declared = request.body["tools"][0]["functionDeclarations"][0]
    assert declared["description"] == "Add two numbers."
    assert agent.metadata()["tools"] == ["add", "explode"]


def test_the_conversation_and_its_tool_calls_carry_over_to_the_next_turn(fake: FakeGemini, tools_module: str,
                                                                          tmp_path: Path) -> None:
    fake.add_tool_script(r"first", [{"name": "add", "args": {"a": 40}}, "It is 42."])
    fake.add_tool_script(r"second", ["Still 42."])
    agent = build({"tools": tools_module}, tmp_path)
    one = agent.chat([Message("user", "first question")])
    two = agent.chat([Message("user", "first question"), Message("agent", one.text), Message("user", "second")])
    assert two.text == "Still 42." and two.tool_calls == []
    contents = fake.requests[-1].contents
    kinds = [next(iter(p)) for c in contents for p in c["parts"]]
    assert kinds == ["text", "functionCall", "functionResponse", "text", "text"]
    assert agent.metadata()["usage"]["calls"] == 3  # the agent's tokens add up over the scenario


def test_a_new_conversation_starts_from_the_messages_given(fake: FakeGemini, tools_module: str, tmp_path: Path) -> None:
    fake.default_text = "fine"
    agent = build({"tools": tools_module}, tmp_path)
    agent.chat([Message("user", "one")])
    agent.chat([Message("user", "other"), Message("agent", "earlier"), Message("user", "two")])
    texts = [p.get("text") for c in fake.requests[-1].contents for p in c["parts"]]
    assert texts == ["other", "earlier", "two"]  # rebuilt from the messages, not appended to "one"


def test_a_model_that_never_stops_calling_tools_is_an_agent_error(fake: FakeGemini, tools_module: str,
                                                                   tmp_path: Path) -> None:
    fake.add_rule(r"", function_call={"name": "add", "args": {"a": 1}})
    agent = build({"tools": tools_module, "max_tool_rounds": 2}, tmp_path)
    with pytest.raises(AgentError, match="max_tool_rounds=2 rounds"):
        agent.chat([Message("user", "loop")])
    assert fake.request_count == 3  # two rounds of tools, then one answer that still asked for more


def test_an_unknown_tool_is_answered_with_an_error_the_model_can_read(fake: FakeGemini, tools_module: str,
                                                                       tmp_path: Path) -> None:
    fake.add_tool_script(r"", [{"name": "serch", "args": {}}, "sorry"])
    agent = build({"tools": tools_module}, tmp_path)
    reply = agent.chat([Message("user", "go")])
    assert reply.tool_calls[0].metadata["error"] is True
    assert "unknown tool 'serch'; available: add, explode" in reply.tool_calls[0].result
    assert "unknown tool" in str(fake.requests[-1].function_responses[0]["response"]["error"])


def test_instructions_from_a_file_and_skills_reach_the_model(fake: FakeGemini, tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "helper.md").write_text("You help with bookings.")
    skill = tmp_path / "skills" / "booking"
    (skill / "reference").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: booking\ndescription: Book rooms.\n---\nAlways confirm the date.\n")
    (skill / "reference" / "rates.md").write_text("Weekend rate: +20%")
    fake.add_tool_script(r"rate", [{"name": "read_skill_file", "args": {"skill": "booking", "path": "reference/rates.md"}},
                                   lambda req: str(req.function_responses[0]["response"]["result"])])
    agent = build({"instructions": "prompts/helper.md", "skills": ["skills/booking"]}, tmp_path)
    reply = agent.chat([Message("user", "weekend rate?")])
    system = fake.requests[0].system
    assert system.startswith("You help with bookings.")
    assert "## Skill: booking" in system and "Book rooms." in system and "Always confirm the date." in system
    assert "reference/rates.md" in system
    assert reply.text == "Weekend rate: +20%"
    assert agent.metadata()["skills"] == ["booking"]


def test_a_skill_file_outside_the_skill_cannot_be_read(fake: FakeGemini, tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "s"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("Do things.")
    (skill / "notes.txt").write_text("ok")
    (tmp_path / "secret.txt").write_text("top secret")
    fake.add_tool_script(r"", [{"name": "read_skill_file", "args": {"skill": "s", "path": "../../secret.txt"}}, "done"])
    reply = build({"skills": ["skills/s"]}, tmp_path).chat([Message("user", "read")])
    assert reply.tool_calls[0].metadata["error"] is True and "top secret" not in str(reply.tool_calls[0].result)


@pytest.mark.parametrize(("table", "message"), [
    ({"gemini": "m", "instruction": "x"}, r"^f\.feature:3: \[tool\.fabtest\.agents\.helper\]: unknown key 'instruction' \(did you mean 'instructions'\?\)$"),
    ({"gemini": "m", "max_tool_rounds": 0}, r"agents.helper\]: max_tool_rounds: Input should be greater than"),
    ({"gemini": "m", "skills": ["nope"]}, r"skills\[0\]: 'nope' has no SKILL.md"),
    ({"gemini": "m", "instructions": "prompts/missing.md"}, r"instructions file 'prompts/missing.md' not found"),
    ({"gemini": "m", "tools": "no_such_module_xyz:T"}, r"tools: tools 'no_such_module_xyz:T' does not import"),
    ({"gemini": "m", "mcp": [{"cmd": ["x"]}]}, r"mcp\[0\]: unknown key 'cmd'"),
    ({"gemini": "m", "mcp": [{"env": {}}]}, r"mcp\[0\]: give command = "),
    ({"gemini": "m", "mcp": [{"url": "ftp://x"}]}, r"mcp\[0\]: url must be an http\(s\) URL"),
    ({"provider": "openai"}, r"provider = \"openai\" needs model"),
])
def test_bad_configuration_is_one_line_naming_the_key(fake: FakeGemini, tmp_path: Path, table: dict[str, Any],
                                                      message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        make_agent(table, {"agent_name": "helper", "rootdir": str(tmp_path)}, where="f.feature:3")
    assert "\n" not in str(info.value)


def test_without_a_key_the_agent_is_not_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LLMNotConfigured, match="set GEMINI_API_KEY"):
        make_agent({"gemini": "gemini-2.5-flash"}, {"rootdir": str(tmp_path)}, where="x")


def test_fake_gemini_tool_script_is_stateless_per_loop(fake: FakeGemini) -> None:
    """Two loops interleaved get their own steps: the step comes from the request, not a counter."""
    fake.add_tool_script(r"loop", [{"name": "t", "args": {}}, "end"])
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=fake.base_url))
    user = types.Content(role="user", parts=[types.Part(text="loop please")])
    first = client.models.generate_content(model="m", contents=[user])
    again = client.models.generate_content(model="m", contents=[user])
    assert first.function_calls and again.function_calls  # the same round twice: the same step
    answered = client.models.generate_content(model="m", contents=[
        user, first.candidates[0].content,
        types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(name="t", response={}))]),
    ])
    assert answered.text == "end"
    other = client.models.generate_content(model="m", contents="something else")
    assert other.text == "OK"  # the pattern is matched against the latest user text only


def test_rate_limits_are_retried_and_an_outage_is_an_agent_error(fake: FakeGemini, tmp_path: Path) -> None:
    fake.add_fault(429, times=1)
    fake.default_text = "hello"
    agent = build({"backoff": 0.01, "max_retries": 1}, tmp_path)
    assert agent.chat([Message("user", "hi")]).text == "hello"
    assert fake.request_count == 2  # one 429, then the answer
    fake.add_fault(500, times=None)
    with pytest.raises(AgentError, match="the model failed: .*gave up after 2 attempt"):
        agent.chat([Message("user", "hi")])


def test_variables_inside_the_mcp_list_come_from_the_environment(fake: FakeGemini, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FABTEST_TEST_MCP_TOKEN", raising=False)
    table = {"mcp": [{"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${FABTEST_TEST_MCP_TOKEN}"}}]}
    with pytest.raises(UsageError, match=r"uses \$\{FABTEST_TEST_MCP_TOKEN\}, which is not set"):
        build(table, tmp_path)
    monkeypatch.setenv("FABTEST_TEST_MCP_TOKEN", "s3cret")
    assert build(table, tmp_path)._specs[0].headers == (("Authorization", "Bearer s3cret"),)
