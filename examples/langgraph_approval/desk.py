"""A refund desk's LangGraph agent: a model node and a tool node in a loop; the refund tool stops
for a person's approval with interrupt(), the Agent Inbox way, before it moves any money.

Offline (the default) the model is the scripted chat model of fake_model.py, so no key is needed;
set DESK_MODEL (for example DESK_MODEL=google_genai:gemini-2.5-flash, with `pip install langchain
langchain-google-genai` and GEMINI_API_KEY) to test the same graph on a real model.
"""

import os

from fake_model import ScriptedChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

ORDERS = {"A1": 30.0, "B2": 120.0}
INSTRUCTIONS = SystemMessage("You handle refunds. Refund only with the refund tool; a person approves each one.")


@tool
def refund(order: str, amount: float) -> dict:
    """Refund `amount` EUR for `order`, once a person approved it."""
    response = interrupt([{
        "action_request": {"action": "refund", "args": {"order": order, "amount": amount}},
        "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True},
        "description": f"Refund {amount:.2f} EUR for order {order}?",
    }])[0]
    if response["type"] == "edit":
        amount = response["args"]["args"]["amount"]
    elif response["type"] != "accept":
        return {"refunded": False, "reason": response["args"] or "not approved"}
    return {"refunded": True, "order": order, "amount": amount}


def _model():
    if os.environ.get("DESK_MODEL"):
        from langchain.chat_models import init_chat_model

        return init_chat_model(os.environ["DESK_MODEL"])
    return ScriptedChatModel(orders=ORDERS)


model = _model().bind_tools([refund])


def call_model(state: MessagesState) -> dict:
    return {"messages": [model.invoke([INSTRUCTIONS, *state["messages"]])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode([refund]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = builder.compile(checkpointer=InMemorySaver())  # an interrupted graph resumes from its checkpoint
