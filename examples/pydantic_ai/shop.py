"""A tea shop's PydanticAI agent: it quotes prices from its catalogue with the get_price tool.

Offline (the default) its model is the scripted FunctionModel of fake_model.py, so no key is needed;
set SHOP_MODEL (for example SHOP_MODEL=google-gla:gemini-2.5-flash with GEMINI_API_KEY) to test the
same agent on a real model.
"""

import os

from fake_model import scripted_model
from pydantic_ai import Agent

CATALOGUE = {"green tea": {"price": 4.50, "currency": "EUR"}, "black tea": {"price": 3.20, "currency": "EUR"}}

agent = Agent(
    os.environ.get("SHOP_MODEL") or scripted_model(),
    name="tea_shop",
    instructions="You sell tea. Quote prices only from get_price; never guess one.",
)


@agent.tool_plain
def get_price(item: str) -> dict:
    """The price of one item of the catalogue ("green tea", "black tea")."""
    if item not in CATALOGUE:
        return {"item": item, "error": f"not in the catalogue; we sell {', '.join(CATALOGUE)}"}
    return {"item": item, **CATALOGUE[item]}
