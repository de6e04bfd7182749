"""A deterministic venue-booking agent used by the example features.

It keeps real multi-turn state (city, date, group size, chosen venue), but recomputes that state
from the message list on every call, so the same conversation always gets the same replies and the
agent works the same in-process, over HTTP and behind the CLI front-end.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabtest.conversation import AgentResponse, Message, ToolCall

CATALOGUE: tuple[dict[str, Any], ...] = (
    {"id": "ber-spree", "name": "Spreeblick Loft", "city": "Berlin", "capacity": 20, "price_per_day": 450},
    {"id": "ber-mitte", "name": "Mitte Meeting Hub", "city": "Berlin", "capacity": 12, "price_per_day": 320},
    {"id": "ber-hall", "name": "Tempelhof Hall", "city": "Berlin", "capacity": 200, "price_per_day": 2900},
    {"id": "muc-isar", "name": "Isar Studio", "city": "Munich", "capacity": 15, "price_per_day": 380},
    {"id": "muc-alte", "name": "Alte Brauerei", "city": "Munich", "capacity": 80, "price_per_day": 1500},
    {"id": "ham-hafen", "name": "Hafenblick Rooms", "city": "Hamburg", "capacity": 25, "price_per_day": 520},
    {"id": "stu-neckar", "name": "Neckar Forum", "city": "Stuttgart", "capacity": 40, "price_per_day": 700},
)
#: Dates on which a venue is already taken: (venue id, normalised date).
BOOKED: frozenset[tuple[str, str]] = frozenset({("ber-mitte", "12 March"), ("muc-isar", "3 May")})

_MONTHS = (
    "January February March April May June July August September October November December".split()
)
_DATE_RE = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(_MONTHS) + r")\b|\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\b",
    re.IGNORECASE,
)
_SIZE_RE = re.compile(r"\b(\d{1,4})\s*(?:people|persons|guests|attendees|participants|of us|pax)\b", re.IGNORECASE)
_FOR_N_RE = re.compile(r"\bfor\s+(\d{1,4})\b", re.IGNORECASE)
_YES_RE = re.compile(r"\b(yes|yep|sure|please do|book it|go ahead|confirm)\b", re.IGNORECASE)
_GREETING_RE = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening))\b", re.IGNORECASE)


@dataclass
class _State:
    city: str | None = None
    date: str | None = None
    size: int | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    chosen: dict[str, Any] | None = None
    available: bool = False
    booking: str | None = None


def search_venues(city: str, capacity: int) -> list[dict[str, Any]]:
    """Venues in ``city`` that hold at least ``capacity`` people, smallest first."""
    found = [v for v in CATALOGUE if v["city"].lower() == city.lower() and v["capacity"] >= capacity]
    return sorted(found, key=lambda v: v["capacity"])


def check_availability(venue_id: str, date: str) -> dict[str, Any]:
    return {"venue_id": venue_id, "date": date, "available": (venue_id, date) not in BOOKED}


def book_venue(venue_id: str, date: str, people: int) -> dict[str, Any]:
    digest = hashlib.sha256(f"{venue_id}|{date}|{people}".encode()).hexdigest()[:6].upper()
    return {"confirmation": f"BK-{digest}", "venue_id": venue_id, "date": date, "people": people}


class VenueAgent:
    """The demo agent. ``style`` is ``friendly`` or ``curt``; ``invent_prices`` makes it misquote prices."""

    def __init__(self, *, style: str = "friendly", invent_prices: bool = False) -> None:
        if style not in ("friendly", "curt"):
            raise ValueError(f"style must be 'friendly' or 'curt', got {style!r}")
        self.style = style
        self.invent_prices = invent_prices

    def metadata(self) -> dict[str, Any]:
        # the declared tools let a step's misspelt tool name be caught and the run's tool coverage be told
        return {"agent": "fabtest-demo-venue-bot", "style": self.style, "invent_prices": self.invent_prices,
                "tools": ["search_venues", "check_availability", "book_venue"]}

    def chat(self, messages: Sequence[Message], on_tool_call: Any = None) -> AgentResponse:
        state = _State()
        reply, calls = "", list[ToolCall]()
        for message in messages:
            if message.role == "user":
                reply, calls = self._step(state, message.content)
        if on_tool_call is not None:
            for call in calls:
                on_tool_call(call)
        return AgentResponse(text=reply, tool_calls=calls, metadata={"state": _public_state(state)})

    # -- one user message -------------------------------------------------------------------------
    def _step(self, state: _State, text: str) -> tuple[str, list[ToolCall]]:
        _absorb_details(state, text)
        calls: list[ToolCall] = []

        if state.booking:
            return self._say("Your booking is already confirmed", f"(confirmation {state.booking})."), calls

        if state.chosen is None and state.results:
            state.chosen = _pick(state.results, text)
        if state.chosen is not None and not state.available:
            return self._check(state, calls)
        if state.chosen is not None and state.available and _YES_RE.search(text):
            return self._book(state, calls)

        missing = [name for name, value in (("city", state.city), ("date", state.date), ("size", state.size))
                   if not value]
        if missing:
            return self._ask(missing, greeted=bool(_GREETING_RE.match(text))), calls
        if not state.results:
            return self._search(state, calls)
        if state.chosen is not None:
            return self._say(f"Shall I book {state.chosen['name']} for you on {state.date}?"), calls
        return self._say("Which of the venues would you like?"), calls

    def _ask(self, missing: list[str], greeted: bool) -> str:
        questions = {
            "city": "Which city should the venue be in?",
            "date": "What date is the event?",
            "size": "How many people will attend?",
        }
        asked = " ".join(questions[m] for m in missing)
        if self.style == "curt":
            return asked
        opener = "Hello! I'd be happy to help you find a venue. " if greeted else "Thanks! "
        return opener + asked

    def _search(self, state: _State, calls: list[ToolCall]) -> tuple[str, list[ToolCall]]:
        assert state.city and state.size
        results = search_venues(state.city, state.size)
        calls.append(ToolCall("search_venues", {"city": state.city, "capacity": state.size}, result=results))
        state.results = results
        if not results:
            return self._say(f"Sorry, I found no venue in {state.city} for {state.size} people."), calls
        listing = "; ".join(f"{v['name']} (up to {v['capacity']} people, €{self._price(v)} per day)" for v in results)
        return self._say(f"I found {len(results)} venues in {state.city} for {state.size} people: {listing}.",
                         "Which one would you like?"), calls

    def _check(self, state: _State, calls: list[ToolCall]) -> tuple[str, list[ToolCall]]:
        assert state.chosen and state.date
        result = check_availability(state.chosen["id"], state.date)
        calls.append(ToolCall("check_availability", {"venue_id": state.chosen["id"], "date": state.date},
                              result=result))
        if not result["available"]:
            name = state.chosen["name"]
            state.results = [v for v in state.results if v["id"] != state.chosen["id"]]
            state.chosen = None
            others = ", ".join(v["name"] for v in state.results) or "no other venue"
            return self._say(f"Sorry, {name} is not available on {state.date}. Alternatives: {others}."), calls
        state.available = True
        return self._say(f"{state.chosen['name']} is available on {state.date} "
                         f"at €{self._price(state.chosen)} per day.",
                         "Shall I book it?"), calls

    def _book(self, state: _State, calls: list[ToolCall]) -> tuple[str, list[ToolCall]]:
        assert state.chosen and state.date and state.size
        result = book_venue(state.chosen["id"], state.date, state.size)
        calls.append(ToolCall("book_venue", {"venue_id": state.chosen["id"], "date": state.date, "people": state.size},
                              result=result))
        state.booking = result["confirmation"]
        return self._say(f"Booked {state.chosen['name']} for {state.size} people on {state.date}.",
                         f"Your confirmation number is {state.booking}."), calls

    def _price(self, venue: dict[str, Any]) -> int:
        return int(venue["price_per_day"] * (0.5 if self.invent_prices else 1))

    def _say(self, *parts: str) -> str:
        text = " ".join(parts)
        if self.style == "curt":
            return text.replace("Sorry, ", "").replace("Thanks! ", "")
        return text + (" Happy to help with anything else!" if "confirmation number" in text else "")


def _absorb_details(state: _State, text: str) -> None:
    for venue_city in sorted({v["city"] for v in CATALOGUE}):
        if re.search(rf"\b{venue_city}\b", text, re.IGNORECASE):
            state.city = venue_city
    if m := _DATE_RE.search(text):
        day, month = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        state.date = f"{int(day)} {month.capitalize()}"
    if m := (_SIZE_RE.search(text) or _FOR_N_RE.search(text)):
        state.size = int(m.group(1))


def _pick(results: list[dict[str, Any]], text: str) -> dict[str, Any] | None:
    lowered = text.lower()
    for venue in results:
        if venue["name"].lower() in lowered or venue["name"].split()[0].lower() in lowered.split():
            return venue
    if re.search(r"\b(first|cheapest|smallest)\b", lowered) or re.search(r"\bthe first one\b", lowered):
        return results[0]
    return None


def _public_state(state: _State) -> dict[str, Any]:
    return {"city": state.city, "date": state.date, "size": state.size,
            "chosen": state.chosen["id"] if state.chosen else None, "booking": state.booking}


def build_agent(context: Mapping[str, Any] | None = None) -> VenueAgent:
    """Factory used by ``[tool.fabtest] agent``: a fresh agent per scenario."""
    context = context or {}
    return VenueAgent(style=str(context.get("style", "friendly")), invent_prices=bool(context.get("invent_prices")))


def build_grumpy_agent(context: Mapping[str, Any] | None = None) -> VenueAgent:
    """The same agent with curt replies: shows failing soft criteria."""
    return VenueAgent(style="curt")


def build_inventive_agent(context: Mapping[str, Any] | None = None) -> VenueAgent:
    """Quotes half the catalogue price: the grounding check should catch it."""
    return VenueAgent(invent_prices=True)
