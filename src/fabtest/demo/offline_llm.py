"""A heuristic stand-in for Gemini that plays the demo's simulated users and judge offline.

It answers fabtest's own prompts (simulator, criteria, grounding, intent, goal, topic choice)
through :class:`fabtest.testing.FakeGemini`, with rules simple enough to predict: a reply is
"friendly" when it greets or thanks, "concise" with at most three sentences, a price is grounded
when the tool results carry it. The test suite runs the example features end to end against it,
and ``python -m fabtest.demo.offline_llm`` (it prints the variables to set) lets you try the simulated examples without
a key.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from fabtest.testing.fake_gemini import FakeGemini, FakeRequest

_FRIENDLY = re.compile(r"(?i)\b(hello|hi|thanks|thank you|happy to|please|glad)\b")
_CRITERION_NAME = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)
_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)


def answer(request: FakeRequest) -> Any:
    """The JSON (or text) a sensible model would give to one of fabtest's prompts."""
    text = request.text
    if request.tool_names:  # a built-in agent's tool loop, not one of fabtest's prompts
        from fabtest.demo.offline_agent_model import answer as agent_step

        return agent_step(request)
    if "role-playing a HUMAN USER" in text:
        return _simulated_user(request.prompt)
    if "Evaluate the " in text and "CRITERIA" in text:
        return _criteria(request.prompt)
    if "is grounded in the results of the tool" in text:
        return _grounding(request.prompt)
    if "has this intent" in text:
        return _intent(request.prompt)
    if "Decide from the transcript whether the goal was achieved" in text:
        return _goal(request.prompt)
    if "CANDIDATE TOPICS" in text:
        return _topic(request.prompt)
    return "I am the offline fabtest model and do not understand this prompt."


# -- the simulated user ---------------------------------------------------------------------------
def _simulated_user(prompt: str) -> dict[str, Any]:
    goal = _section(prompt, "YOUR GOAL")
    facts = _section(prompt, "WHAT YOU KNOW")
    transcript = _section(prompt, "THE CONVERSATION SO FAR")
    agent_lines = [line[len("Agent: "):] for line in transcript.splitlines() if line.startswith("Agent: ")]
    if not agent_lines:
        return {"message": "Hi, I need a venue for an event.", "goal_complete": False}
    last = agent_lines[-1]
    if "confirmation number" in last or "already confirmed" in last:
        return {"message": "Great, thank you!", "goal_complete": True}
    if re.search(r"(?i)which city|how many people|what date", last):
        details = " ".join(v for v in re.findall(r"^- [^:]+: (.+)$", facts, re.MULTILINE))
        return {"message": f"{goal} {details}".strip(), "goal_complete": False}
    if re.search(r"(?i)shall i book", last):
        return {"message": "Yes, please book it.", "goal_complete": False}
    names = re.findall(r"(?:: |; |Alternatives: |, )([A-Z][\w]+(?: [A-Z][\w]+)*) \(", last)
    names += re.findall(r"Alternatives: ([A-Z][\w ]+?)(?:,|\.)", last)
    if names:
        return {"message": f"{names[0]}, please.", "goal_complete": False}
    return {"message": "Can you help me book it?", "goal_complete": False}


def _section(prompt: str, heading: str) -> str:
    m = re.search(rf"^{re.escape(heading)}[^\n]*\n(.*?)(?:\n\n[A-Z][A-Z ]+|\Z)", prompt, re.DOTALL | re.MULTILINE)
    return m.group(1).strip() if m else ""


# -- the judge --------------------------------------------------------------------------------------
def _criteria(prompt: str) -> dict[str, Any]:
    subject = _blocks(prompt)[0] if _blocks(prompt) else ""
    reply = _agent_reply(subject)
    verdicts = []
    for name in _CRITERION_NAME.findall(prompt):
        passed, reason = _judge_criterion(name.strip(), prompt, reply, subject)
        verdicts.append({"criterion": name.strip(), "verdict": "passed" if passed else "failed", "reasoning": reason})
    return {"verdicts": verdicts}


def _judge_criterion(name: str, prompt: str, reply: str, subject: str) -> tuple[bool, str]:
    described = (name + " " + _description(prompt, name)).lower()
    if "friendly" in described or "polite" in described or "warm" in described:
        ok = bool(_FRIENDLY.search(reply))
        return ok, "greets or thanks the user" if ok else "no greeting, thanks or polite phrase"
    if "concise" in described or "sentences" in described:
        count = len(re.findall(r"[.!?](?:\s|$)", reply))
        return count <= 3, f"{count} sentences"
    if "same question twice" in described or "repeat" in described:
        questions = [q.strip() for q in re.findall(r"[^.!?]*\?", subject)]
        return len(questions) == len(set(questions)), "no question repeated" if len(questions) == len(set(questions)) \
            else "a question was repeated"
    if "price" in described:
        ok = "€" in reply
        return ok, "quotes a price" if ok else "no price quoted"
    return True, "nothing in the reply contradicts the criterion"


def _description(prompt: str, name: str) -> str:
    m = re.search(rf"name: {re.escape(name)}\n\s+description: (.+)", prompt)
    return m.group(1) if m else ""


def _grounding(prompt: str) -> dict[str, Any]:
    blocks = _blocks(prompt)
    response, results = (blocks + ["", ""])[:2]
    prices = {int(p) for p in re.findall(r'"price_per_day": (\d+)', results)}
    claims = []
    for name, price in re.findall(r"([A-Z][\w]+(?: [A-Z][\w]+)*) \([^)]*€(\d+)", response):
        supported = int(price) in prices and name in results
        claims.append({"claim": f"{name} costs €{price} per day", "supported": supported,
                       "evidence": "price_per_day matches" if supported else f"the tool results list no €{price}"})
    for price in re.findall(r"at €(\d+) per day", response):
        supported = int(price) in prices
        claims.append({"claim": f"the venue costs €{price} per day", "supported": supported,
                       "evidence": "price_per_day matches" if supported else f"the tool results list no €{price}"})
    return {"claims": claims, "note": "prices checked against price_per_day"}


def _intent(prompt: str) -> dict[str, Any]:
    intent = re.search(r"INTENT: (.+)", prompt)
    wanted = intent.group(1).lower() if intent else ""
    reply = _agent_reply(_blocks(prompt)[0] if _blocks(prompt) else "")
    if "gather" in wanted or "ask" in wanted:
        ok = "?" in reply
    elif "book" in wanted or "confirm" in wanted:
        ok = "confirmation" in reply.lower()
    elif "present" in wanted or "offer" in wanted:
        ok = "I found" in reply
    else:
        ok = True
    return {"verdict": "passed" if ok else "failed", "reasoning": f"reply {'matches' if ok else 'does not match'} {wanted!r}"}


def _goal(prompt: str) -> dict[str, Any]:
    transcript = _blocks(prompt)[0] if _blocks(prompt) else ""
    ok = "confirmation number" in transcript
    return {"verdict": "passed" if ok else "failed",
            "reasoning": "the agent confirmed a booking" if ok else "no booking was confirmed"}


def _topic(prompt: str) -> dict[str, Any]:
    current = re.search(r'currently in the topic "([^"]+)"', prompt)
    candidates = re.findall(r"^- ([\w-]+):", prompt, re.MULTILINE)
    reply = _agent_reply(_blocks(prompt)[-1] if _blocks(prompt) else "")
    choice = current.group(1) if current else (candidates[0] if candidates else "")
    if "?" in reply and len(candidates) > 1 and re.search(r"(?i)which city|how many|what date", reply):
        choice = next((c for c in candidates if "gather" in c), choice)
    return {"topic": choice, "reasoning": "by the content of the reply"}


def _blocks(prompt: str) -> list[str]:
    return _BLOCK.findall(prompt)


def _agent_reply(exchange: str) -> str:
    lines = [line[len("Agent: "):] for line in exchange.splitlines() if line.startswith("Agent: ")]
    return lines[-1] if lines else exchange


def offline_gemini(latency: float = 0.0) -> FakeGemini:
    """A FakeGemini (not started) that answers with this module's heuristics."""
    return FakeGemini(handler=answer, latency=latency)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve the offline stand-in for Gemini on a free port of 127.0.0.1; prints the env to set.")
    parser.parse_args(argv)
    fake = offline_gemini().start()
    print(json.dumps(fake.env("offline")), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
