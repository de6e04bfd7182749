"""The scripted model of every agent of tests/frameworks/published/customer_service.py, for the
OpenAI-compatible fake (tests/builtin_agent/fake_openai.py): who speaks is told from the
instructions, what it does from the last message."""

from __future__ import annotations

import re
from typing import Any

from builtin_agent.fake_openai import message, tool_call


def _speaker(body: dict[str, Any]) -> str:
    system = str(body["messages"][0].get("content", ""))
    return next(name for name in ("triage", "seat booking", "FAQ") if f"the {name} agent" in system)


def answer(body: dict[str, Any]) -> tuple[int, Any]:
    """The model of every agent, scripted by who is speaking (the instructions) and the last message."""
    last, speaker = body["messages"][-1], _speaker(body)
    said = str(last.get("content", ""))
    if speaker == "triage":
        target = "transfer_to_seat_booking_agent" if "seat" in said else "transfer_to_faq_agent"
        return 200, message(None, [tool_call(f"call_h{len(body['messages'])}", target, {})])
    if last["role"] == "tool" and speaker == "seat booking" and not said.startswith("{"):
        return 200, message(f"Done: {said}")
    if last["role"] == "tool" and speaker == "FAQ":
        return 200, message(said)
    found = re.search(r"([A-Z]{3}\d{3}).*?(\d{1,2}[A-F])", " ".join(str(m.get("content")) for m in body["messages"]))
    if speaker == "seat booking" and found:
        return 200, message(None, [tool_call("call_seat", "update_seat",
                                             {"confirmation_number": found[1], "new_seat": found[2]})])
    if speaker == "seat booking":
        return 200, message("What is your confirmation number, and which seat would you like?")
    return 200, message(None, [tool_call("call_faq", "faq_lookup_tool", {"question": said})])
