"""A tea shop's Google ADK agent: it quotes prices from its catalogue with the get_price tool.

It runs on gemini-2.5-flash. Without GEMINI_API_KEY, conftest.py points google-genai at
fabtest's FakeGemini (a scripted Gemini server on 127.0.0.1, fake_model.py), so no key is needed;
with a key, the same agent talks to the real model.
"""

from google.adk.agents import Agent

CATALOGUE = {"green tea": {"price": 4.50, "currency": "EUR"}, "black tea": {"price": 3.20, "currency": "EUR"}}


def get_price(item: str) -> dict:
    """The price of one item of the catalogue ("green tea", "black tea")."""
    if item not in CATALOGUE:
        return {"item": item, "error": f"not in the catalogue; we sell {', '.join(CATALOGUE)}"}
    return {"item": item, **CATALOGUE[item]}


root_agent = Agent(
    name="tea_shop",
    model="gemini-2.5-flash",
    instruction="You sell tea. Quote prices only from get_price; never guess one.",
    tools=[get_price],
)
