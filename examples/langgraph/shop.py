"""A tea shop's LangGraph agent: a model node and a tool node in a loop, quoting prices with get_price.

Offline (the default) the model is the scripted chat model of fake_model.py, so no key is needed;
set SHOP_MODEL (for example SHOP_MODEL=google_genai:gemini-2.5-flash, with `pip install langchain
langchain-google-genai` and GEMINI_API_KEY) to test the same graph on a real model.
"""

import os

from fake_model import ScriptedChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

CATALOGUE = {"green tea": {"price": 4.50, "currency": "EUR"}, "black tea": {"price": 3.20, "currency": "EUR"}}
INSTRUCTIONS = SystemMessage("You sell tea. Quote prices only from get_price; never guess one.")


@tool
def get_price(item: str) -> dict:
    """The price of one item of the catalogue ("green tea", "black tea")."""
    if item not in CATALOGUE:
        return {"item": item, "error": f"not in the catalogue; we sell {', '.join(CATALOGUE)}"}
    return {"item": item, **CATALOGUE[item]}


def _model():
    if os.environ.get("SHOP_MODEL"):
        from langchain.chat_models import init_chat_model

        return init_chat_model(os.environ["SHOP_MODEL"])
    return ScriptedChatModel()


model = _model().bind_tools([get_price])


def call_model(state: MessagesState) -> dict:
    return {"messages": [model.invoke([INSTRUCTIONS, *state["messages"]])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode([get_price]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
# the checkpointer keeps each thread's messages: fabtest gives every scenario a thread of its own
graph = builder.compile(checkpointer=InMemorySaver())
