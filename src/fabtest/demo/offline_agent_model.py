"""A scripted model that plays the built-in venue agent offline, through function calls.

The offline stand-in for Gemini (:mod:`fabtest.demo.offline_llm`) hands it every request that
offers tools, so ``features/mcp_agent.feature`` runs the real tool loop (google-genai client,
FakeGemini, the MCP server started by fabtest) without a key. The rules are simple enough to
predict: a city and a group size make it call ``search_venues``; a venue name makes it call
``check_availability`` (and ``book_venue`` when the user says "book"); once the tool results come
back it summarises them. A real model does the same with its own wording.
"""

from __future__ import annotations

import re
from typing import Any

from fabtest.demo.agent import CATALOGUE
from fabtest.testing.fake_gemini import FakeRequest, Reply

__all__ = ["answer"]

_SIZE = re.compile(r"\b(\d{1,4})\s*(?:people|persons|guests)\b", re.IGNORECASE)
_DATE = re.compile(r"\b(\d{1,2})\s+(January|February|March|April|May|June|July|August|September|October|"
                   r"November|December)\b", re.IGNORECASE)
_CITIES = sorted({v["city"] for v in CATALOGUE})


def answer(request: FakeRequest) -> Reply:
    """The next step of the tool loop for this request."""
    responses = request.function_responses
    if responses:
        return Reply(text=" ".join(_summary(r.get("name", ""), r.get("response") or {}) for r in responses))
    text = request.last_user_text
    history = _user_texts(request)
    date = _last(_DATE, history)
    venue = next((v for v in CATALOGUE if v["name"].lower() in text.lower()), None)
    if venue is not None and date:
        if re.search(r"(?i)\bbook\b", text):
            size = _last(_SIZE, history)
            return Reply(function_call={"name": "book_venue", "args": {
                "venue_id": venue["id"], "date": date, "people": int(size or venue["capacity"])}})
        return Reply(function_call={"name": "check_availability", "args": {"venue_id": venue["id"], "date": date}})
    city = next((c for c in _CITIES if re.search(rf"\b{c}\b", text, re.IGNORECASE)), None)
    size = _last(_SIZE, [text])
    if city and size:
        return Reply(function_call={"name": "search_venues", "args": {"city": city, "capacity": int(size)}})
    return Reply(text="Hello! Which city, what date and how many people?")


def _user_texts(request: FakeRequest) -> list[str]:
    return [str(p["text"]) for c in request.contents if c.get("role", "user") == "user"
            for p in c.get("parts") or [] if "text" in p]


def _last(pattern: re.Pattern[str], texts: list[str]) -> str | None:
    for text in reversed(texts):
        m = pattern.search(text)
        if m:
            return f"{int(m.group(1))} {m.group(2).capitalize()}" if m.lastindex == 2 else m.group(1)
    return None


def _summary(name: str, response: dict[str, Any]) -> str:
    if "error" in response:
        return f"Sorry, {name} failed: {response['error']}"
    result = response.get("result", response)
    if name == "search_venues":
        if not result:
            return "Sorry, I found no venue for that."
        listing = "; ".join(f"{v['name']} (up to {v['capacity']} people, €{v['price_per_day']} per day)"
                            for v in result)
        return f"I found {len(result)} venues: {listing}. Which one would you like?"
    if name == "check_availability":
        venue = next((v["name"] for v in CATALOGUE if v["id"] == result.get("venue_id")), result.get("venue_id"))
        if result.get("available"):
            return f"{venue} is available on {result.get('date')}. Shall I book it?"
        return f"Sorry, {venue} is not available on {result.get('date')}."
    if name == "book_venue":
        return f"Booked for {result.get('people')} people on {result.get('date')}. " \
               f"Your confirmation number is {result.get('confirmation')}."
    return f"{name} returned {result}."
