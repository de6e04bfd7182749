"""An airline's customer service on the OpenAI Agents SDK, in the shape of the SDK's own example
(openai/openai-agents-python, ``examples/customer_service/main.py``): a triage agent that hands
off to an FAQ agent and, through ``handoff(agent=..., on_handoff=...)``, to a seat booking agent;
a Pydantic run context that the handoff hook and the ``update_seat`` tool (which takes the SDK's
``RunContextWrapper``) fill in; both specialists hand back to triage.

Written for fabtest's tests after that example, not copied from it: the same agents, context,
tools and hook, with our own wording, and without its interactive ``input()`` loop (fabtest is
the loop). The one line a fabtest user adds is ``@fabtest.tool`` under ``@function_tool``, so
stubs and faults reach the two tools. No model is named: the SDK's default client is pointed at a
local fake by the tests.
"""

from __future__ import annotations

import random

from agents import Agent, RunContextWrapper, function_tool, handoff
from agents.extensions.handoff_prompt import RECOMMENDED_PROMPT_PREFIX
from pydantic import BaseModel

import fabtest


class AirlineAgentContext(BaseModel):
    passenger_name: str | None = None
    confirmation_number: str | None = None
    seat_number: str | None = None
    flight_number: str | None = None


def new_context() -> AirlineAgentContext:
    """The run context of one conversation (``context = "...:new_context"`` in the agent table)."""
    return AirlineAgentContext()


@function_tool(name_override="faq_lookup_tool", description_override="Look up a frequently asked question.")
@fabtest.tool
async def faq_lookup_tool(question: str) -> str:
    if "bag" in question:
        return "One bag, under 50 pounds and 22 x 14 x 9 inches."
    if "wifi" in question:
        return "Free wifi on board: join Airline-Wifi."
    return "I don't know the answer to that."


@function_tool
@fabtest.tool
async def update_seat(context: RunContextWrapper[AirlineAgentContext], confirmation_number: str,
                      new_seat: str) -> str:
    """Change the seat of a booking.

    Args:
        confirmation_number: The booking's confirmation number.
        new_seat: The seat to move to.
    """
    context.context.confirmation_number = confirmation_number
    context.context.seat_number = new_seat
    assert context.context.flight_number is not None, "Flight number is required"  # set by the handoff hook
    return f"Seat changed to {new_seat} on booking {confirmation_number}"


async def on_seat_booking_handoff(context: RunContextWrapper[AirlineAgentContext]) -> None:
    context.context.flight_number = f"FLT-{random.randint(100, 999)}"


faq_agent = Agent[AirlineAgentContext](
    name="FAQ Agent",
    handoff_description="Answers questions about the airline.",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX}\nYou are the FAQ agent. Answer with faq_lookup_tool only; "
                 "hand back to triage what you cannot answer.",
    tools=[faq_lookup_tool],
)

seat_booking_agent = Agent[AirlineAgentContext](
    name="Seat Booking Agent",
    handoff_description="Changes the seat on a flight.",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX}\nYou are the seat booking agent. Ask for the confirmation number "
                 "and the seat wanted, then call update_seat; hand back to triage anything else.",
    tools=[update_seat],
)

triage_agent = Agent[AirlineAgentContext](
    name="Triage Agent",
    handoff_description="Sends each request to the right agent.",
    instructions=f"{RECOMMENDED_PROMPT_PREFIX}\nYou are the triage agent: hand the customer to the agent for "
                 "their request.",
    handoffs=[faq_agent, handoff(agent=seat_booking_agent, on_handoff=on_seat_booking_handoff)],
)

faq_agent.handoffs.append(triage_agent)
seat_booking_agent.handoffs.append(triage_agent)
