"""A phone company's support agent in LangGraph: it looks the account up, lists the plans and
changes the plan, keeping the account it changed in the graph's state.

``lookup_account`` calls the billing API, which tests never reach: the project stubs it in
pyproject.toml. ``change_plan`` writes the new plan into the graph's state (a ``Command``), which
the scenarios check as the conversation's end state. Offline the model is the scripted chat model
of fake_model.py.
"""

import json
from typing import Annotated, Any

from fake_model import ScriptedSupportModel
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

PLANS = [{"name": "basic", "eur": 10}, {"name": "unlimited", "eur": 30}]
INSTRUCTIONS = SystemMessage("Verify the account with lookup_account before you change a plan; "
                             "offer only plans list_plans returns.")


class SupportState(MessagesState):
    account: dict[str, Any]


@tool
def lookup_account(phone: str) -> dict:
    """The account of a phone number, from the billing API."""
    raise ConnectionError("billing.example.com is not reachable from here")


@tool
def list_plans() -> list:
    """The plans on offer, with their monthly price in EUR."""
    return PLANS


@tool
def change_plan(account_id: str, plan: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Move an account to another plan."""
    done = {"account_id": account_id, "plan": plan}
    return Command(update={"account": {"id": account_id, "plan": plan},
                           "messages": [ToolMessage(json.dumps(done), name="change_plan", tool_call_id=tool_call_id)]})


TOOLS = [lookup_account, list_plans, change_plan]
model = ScriptedSupportModel()


def call_model(state: SupportState) -> dict:
    return {"messages": [model.invoke([INSTRUCTIONS, *state["messages"]])]}


builder = StateGraph(SupportState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = builder.compile(checkpointer=InMemorySaver())
