"""Tool names are known (issue 28 point 9): each framework adapter reads the agent's tools from the
real framework and reports them in its metadata, so a misspelt tool in a step is a usage error with a
"did you mean"; a toolset the framework lists only at run time leaves the list unknown (never a partial
list that would call a real tool a typo), and the table's ``tools = [...]`` wins.

Where no tool list exists at all, a ``must not call`` of a name no run ever called is said in the
summary, and a ``tools`` coverage floor is a failure naming the fix, not silence.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest

from fabtest.agents.base import agent_metadata
from fabtest.errors import UsageError

from .helpers import build, provide

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "--fabtest-no-preflight")


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module}")


def price(item: str) -> dict[str, Any]:
    """The price of an item."""
    return {"item": item, "usd": 3}


def change_plan(plan: str) -> str:
    """Change the customer's plan."""
    return plan


# -- the adapters read the framework's tools ------------------------------------------------------------
def test_adk_lists_the_agent_trees_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("google.adk")
    from google.adk.agents import LlmAgent
    from google.adk.tools import FunctionTool
    from google.adk.tools.base_toolset import BaseToolset

    billing = LlmAgent(name="billing", model="gemini-2.5-flash", tools=[FunctionTool(change_plan)])
    root = LlmAgent(name="shop", model="gemini-2.5-flash", tools=[price], sub_agents=[billing])

    class Remote(BaseToolset):
        async def get_tools(self, readonly_context: Any = None) -> list[Any]:
            return []

    with_toolset = LlmAgent(name="mcp", model="gemini-2.5-flash", tools=[price, Remote()])
    provide(monkeypatch, "adk_tools", root=root, with_toolset=with_toolset)
    assert agent_metadata(build("adk", "adk_tools:root"))["tools"] == ["price", "transfer_to_agent", "change_plan"]
    assert "tools" not in agent_metadata(build("adk", "adk_tools:with_toolset"))  # unknown, not partial
    table = build("adk", "adk_tools:with_toolset", tools=["price", "lookup"])
    assert agent_metadata(table)["tools"] == ["price", "lookup"]


def test_openai_agents_lists_function_tools_and_handoffs_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("agents")
    from agents import Agent, WebSearchTool, function_tool

    billing = Agent(name="billing", tools=[function_tool(change_plan)])
    shop = Agent(name="shop", tools=[function_tool(price)], handoffs=[billing])
    hosted = Agent(name="web", tools=[function_tool(price), WebSearchTool()])
    provide(monkeypatch, "oa_tools", shop=shop, hosted=hosted)
    assert agent_metadata(build("openai_agents", "oa_tools:shop"))["tools"] == ["price", "transfer_to_billing",
                                                                             "change_plan"]
    assert "tools" not in agent_metadata(build("openai_agents", "oa_tools:hosted"))
    assert agent_metadata(build("openai_agents", "oa_tools:hosted", tools=["price", "web_search_call"]))["tools"] == [
        "price", "web_search_call"]


def test_pydantic_ai_lists_the_function_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("pydantic_ai")
    from pydantic_ai import Agent

    agent = Agent("test", name="shop", tools=[change_plan])
    agent.tool_plain(price)
    provide(monkeypatch, "pai_tools", agent=agent)
    assert agent_metadata(build("pydantic_ai", "pai_tools:agent"))["tools"] == ["change_plan", "price"]


def test_a_table_tools_list_is_checked() -> None:
    _needs("langgraph")
    with pytest.raises(UsageError, match="tools must be a list of tool names"):
        build("langgraph", "os:sep", tools="price")


# -- end to end: a LangGraph agent's misspelt tool, and agents with no tool list --------------------------
GRAPH = '''
from typing import Any
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


class Scripted(BaseChatModel):
    @property
    def _llm_type(self):
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage("your plan is unchanged"))])


@tool
def change_plan(plan: str) -> str:
    """Change the customer's plan."""
    return plan


def _model(state):
    return {"messages": [Scripted().invoke(state["messages"])]}


def build(with_tools):
    builder = StateGraph(MessagesState)
    builder.add_node("model", _model)
    builder.add_edge(START, "model")
    if with_tools:
        builder.add_node("tools", ToolNode([change_plan]))
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
    return builder.compile()


graph = build(True)
bare = build(False)
'''

FEATURE = '''Feature: Plans
  Scenario: The agent leaves the plan alone
    Given the agent "support"
    When the user says "keep my plan"
    Then the agent must not call "chnage_plan"
'''


def _project(pytester: pytest.Pytester, target: str) -> None:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nresults_dir = "results"\n\n'
                                         f'[tool.fabtest.agents.support]\nlanggraph = "{target}"\n')
    pytester.makepyfile(support_graph=GRAPH)
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "plans.feature").write_text(FEATURE, encoding="utf-8")


def test_a_misspelt_tool_of_a_langgraph_agent_is_a_usage_error_with_did_you_mean(pytester: pytest.Pytester) -> None:
    _needs("langgraph")
    _project(pytester, "support_graph:graph")
    result = pytester.runpytest_subprocess(*ARGS, "features")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert 'unknown tool "chnage_plan"' in out and 'did you mean "change_plan"?' in out, out


def test_without_a_tool_list_the_summary_names_a_forbidden_tool_never_seen(pytester: pytest.Pytester) -> None:
    _needs("langgraph")
    _project(pytester, "support_graph:bare")
    result = pytester.runpytest_subprocess(*ARGS, "features", "--fabtest-experiment-id", "bare")
    result.assert_outcomes(passed=1)  # nothing to check the name against: the step passes ...
    out = result.stdout.str()
    assert "no tool list, and no run ever called chnage_plan" in out, out  # ... and the summary says so
    document = json.loads((pytester.path / "results" / "bare.json").read_text(encoding="utf-8"))
    assert document["coverage"]["tools"]["forbidden_never_seen"] == ["chnage_plan"]


def test_a_tools_floor_without_a_tool_list_fails_the_run(pytester: pytest.Pytester) -> None:
    _needs("langgraph")
    _project(pytester, "support_graph:bare")
    result = pytester.runpytest_subprocess(*ARGS, "features", "--fabtest-min-coverage", "tools=0.5")
    assert result.ret == 1, result.stdout.str()
    assert "FAILED: tools coverage cannot be judged: no agent declared its tools" in result.stdout.str()
