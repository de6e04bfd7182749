"""A weather agent team on Google ADK, in the shape of ADK's own tutorial ("Build your first
intelligent agent team", the stateful step): a root agent with a weather tool that reads the
user's preferred unit from the session state and writes the last city it looked up
(``tool_context.state``), and two sub-agents it transfers greetings and farewells to.

Written for fabtest's tests after that tutorial, not copied from it; ``@fabtest.tool`` sits on the
weather tool, whose ``tool_context`` ADK injects. The model is Gemini, answered by FakeGemini.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent
from google.adk.tools.tool_context import ToolContext

import fabtest

_CELSIUS = {"london": 15, "tokyo": 25}


def initial_state() -> dict[str, Any]:
    """The session's first state (``context = "...:initial_state"`` in the agent table)."""
    return {"user_preference_temperature_unit": "Fahrenheit"}


@fabtest.tool
def get_weather_stateful(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """The current weather of a city, in the unit the user prefers."""
    unit = tool_context.state.get("user_preference_temperature_unit", "Celsius")
    celsius = _CELSIUS.get(city.lower())
    if celsius is None:
        return {"status": "error", "error_message": f"no weather for {city}"}
    value = celsius if unit == "Celsius" else celsius * 9 / 5 + 32
    tool_context.state["last_city_checked_stateful"] = city
    return {"status": "success", "report": f"{city}: {value:.0f} degrees {unit}"}


def say_hello(name: str | None = None) -> str:
    """Greet the user."""
    return f"Hello, {name}!" if name else "Hello there!"


def say_goodbye() -> str:
    """Say goodbye."""
    return "Goodbye, have a nice day."


greeting_agent = Agent(name="greeting_agent", model="gemini-2.5-flash", tools=[say_hello],
                       instruction="Greet the user with say_hello.", description="Handles greetings.")
farewell_agent = Agent(name="farewell_agent", model="gemini-2.5-flash", tools=[say_goodbye],
                       instruction="Say goodbye with say_goodbye.", description="Handles farewells.")
root_agent = Agent(name="weather_agent_v2", model="gemini-2.5-flash", tools=[get_weather_stateful],
                   instruction="Answer weather questions with get_weather_stateful; transfer greetings to "
                               "greeting_agent and farewells to farewell_agent.",
                   description="The weather team's coordinator.",
                   sub_agents=[greeting_agent, farewell_agent])
