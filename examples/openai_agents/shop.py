"""A tea shop's OpenAI Agents SDK agent: it quotes prices from its catalogue with the get_price tool.

Offline (the default) its model is the scripted Model of fake_model.py, so no key is needed; set
SHOP_MODEL (for example SHOP_MODEL=gpt-4.1-mini with OPENAI_API_KEY) to test the same agent on a
real model.
"""

import os

from agents import Agent, function_tool, set_tracing_disabled
from fake_model import ScriptedModel

CATALOGUE = {"green tea": {"price": 4.50, "currency": "EUR"}, "black tea": {"price": 3.20, "currency": "EUR"}}

if not os.environ.get("SHOP_MODEL"):
    set_tracing_disabled(True)  # offline: no trace is sent to OpenAI


@function_tool
def get_price(item: str) -> dict:
    """The price of one item of the catalogue ("green tea", "black tea")."""
    if item not in CATALOGUE:
        return {"item": item, "error": f"not in the catalogue; we sell {', '.join(CATALOGUE)}"}
    return {"item": item, **CATALOGUE[item]}


agent = Agent(
    name="tea_shop",
    instructions="You sell tea. Quote prices only from get_price; never guess one.",
    tools=[get_price],
    model=os.environ.get("SHOP_MODEL") or ScriptedModel(),
)
