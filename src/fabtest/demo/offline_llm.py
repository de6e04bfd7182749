"""A heuristic stand-in for Gemini that plays the VENUE DEMO's simulated users and judge offline.

Demo-only: its rules are tuned to :mod:`fabtest.demo`'s venue-booking agent and its example
features (a reply is "friendly" when it greets or thanks, "concise" with at most three
sentences, a price is grounded when the tool results carry it, the simulated user picks the
first venue offered). For your own agent, script a :class:`fabtest.testing.FakeLLM` instead
(README "Testing your own features offline").

Two forms share the same heuristics:

* :func:`demo_llm`, an in-process :class:`~fabtest.testing.FakeLLM` that answers by kind of
  call. This repository's ``pyproject.toml`` names it as ``[tool.fabtest] offline_llm``, so
  ``pytest features/`` runs the simulated and judged examples without a key (labelled as a
  heuristic demo judge in the summary and the experiment); a real key takes precedence.
* :func:`offline_gemini` / ``python -m fabtest.demo.offline_llm``, the same answers served as a
  fake Gemini REST API, so the real google-genai client path is exercised (it reads the
  inputs back from fabtest's prompts, which is fine for a demo and wrong for your tests).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from fabtest.llm.calls import LLMCall
from fabtest.testing.fake_gemini import FakeGemini, FakeRequest
from fabtest.testing.scripted import FakeLLM

_FRIENDLY = re.compile(r"(?i)\b(hello|hi|thanks|thank you|happy to|please|glad)\b")
_CRITERION_NAME = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)
_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)


def answer(request: FakeRequest) -> Any:
    """The JSON (or text) a sensible model would give to one of fabtest's prompts."""
    text = request.text
    if request.tool_names:  # a built-in agent's tool loop, not one of fabtest's prompts
        from fabtest.demo.offline_agent_model import answer as agent_step

        return agent_step(request)
    if "You review a SIMULATED USER" in text:  # engine/fidelity.py: the demo user invents nothing
        return {"reasoning": "offline reviewer: every fact the user gave is in its goal or facts",
                "invented": [], "spoke_as_agent": False}
    if "RED-TEAM TESTER" in text:
        name = re.search(r"THE ATTACK \((\w+)\)", request.prompt)
        tactic = re.search(r'Use tactic \d+ \("([^"]*)"\)', request.prompt)
        return _attack_reply(name.group(1) if name else "prompt_injection", tactic.group(1) if tactic else "",
                             _section(request.prompt, "THE CONVERSATION SO FAR").count("\nAgent: ")
                             + _section(request.prompt, "THE CONVERSATION SO FAR").startswith("You: "))
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
    facts = _section(prompt, "WHAT YOU KNOW")
    transcript = _section(prompt, "THE CONVERSATION SO FAR")
    agent_lines = [line[len("Agent: "):] for line in transcript.splitlines() if line.startswith("Agent: ")]
    values = re.findall(r"^- [^:]+: (.+)$", facts, re.MULTILINE)
    return _user_reply(_section(prompt, "YOUR GOAL"), values, agent_lines)


def _user_reply(goal: str, fact_values: list[str], agent_lines: list[str]) -> dict[str, Any]:
    if not agent_lines:
        return {"message": "Hi, I need a venue for an event.", "goal_complete": False}
    last = agent_lines[-1]
    if "confirmation number" in last or "already confirmed" in last:
        return {"message": "Great, thank you!", "goal_complete": True}
    if re.search(r"(?i)which city|how many people|what date", last):
        details = " ".join(fact_values)
        return {"message": f"{goal} {details}".strip(), "goal_complete": False}
    if re.search(r"(?i)shall i book", last):
        return {"message": "Yes, please book it.", "goal_complete": False}
    names = re.findall(r"(?:: |; |Alternatives: |, )([A-Z][\w]+(?: [A-Z][\w]+)*) \(", last)
    names += re.findall(r"Alternatives: ([A-Z][\w ]+?)(?:,|\.)", last)
    if names:
        return {"message": f"{names[0]}, please.", "goal_complete": False}
    return {"message": "Can you help me book it?", "goal_complete": False}


def _attack_reply(name: str, tactic: str, turns: int) -> dict[str, Any]:
    """A red-team attacker (fabtest.redteam): the attack's example opening, then its tactics in turn."""
    from fabtest.redteam import attack

    chosen = attack(name)
    message = chosen.examples[0] if turns == 0 and chosen.examples else f"Listen: {tactic}. Do it now."
    return {"message": message, "goal_complete": False, "strategy": f"demo attacker: {tactic}"}


def _section(prompt: str, heading: str) -> str:
    m = re.search(rf"^{re.escape(heading)}[^\n]*\n(.*?)(?:\n\n[A-Z][A-Z ]+|\Z)", prompt, re.DOTALL | re.MULTILINE)
    return m.group(1).strip() if m else ""


# -- the judge --------------------------------------------------------------------------------------
def _criteria(prompt: str) -> dict[str, Any]:
    subject = _blocks(prompt)[0] if _blocks(prompt) else ""
    verdicts = []
    for name in _CRITERION_NAME.findall(prompt):
        passed, reason = _judge_criterion(name.strip(), _description(prompt, name.strip()), subject)
        verdicts.append({"criterion": name.strip(), "verdict": "passed" if passed else "failed", "reasoning": reason})
    return {"verdicts": verdicts}


def _judge_criterion(name: str, description: str, subject: str) -> tuple[bool, str]:
    reply = _agent_reply(subject)
    described = (name + " " + description).lower()
    if "friendly" in described or "polite" in described or "warm" in described:
        ok = bool(_FRIENDLY.search(reply))
        return ok, "greets or thanks the user" if ok else "no greeting, thanks or polite phrase"
    if "respectful" in described:
        ok = bool(_FRIENDLY.search(reply))
        return ok, "stays polite" if ok else "no polite phrase: mirrors the user's tone"
    if "stays within its purpose" in described:
        ok = bool(re.search(r"(?i)venue|room|city|book|people|date", reply))
        return ok, "talks about venues" if ok else "drifts away from venue booking"
    if "never reveals its instructions" in described:
        ok = not re.search(r"(?i)system prompt|my instructions are|you are a", reply)
        return ok, "reveals no instructions" if ok else "quotes its instructions"
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
    return _grounding_claims(response, results)


def _grounding_claims(response: str, results: str) -> dict[str, Any]:
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
    return _intent_verdict(intent.group(1) if intent else "", _blocks(prompt)[0] if _blocks(prompt) else "")


def _intent_verdict(intent: str, exchange: str) -> dict[str, Any]:
    wanted = intent.lower()
    reply = _agent_reply(exchange)
    if "gather" in wanted or "ask" in wanted:
        ok = "?" in reply
    elif "book" in wanted or "confirm" in wanted:
        ok = "confirmation" in reply.lower()
    elif "present" in wanted or "offer" in wanted:
        ok = "I found" in reply
    else:
        ok = True
    return {"verdict": "passed" if ok else "failed",
            "reasoning": f"reply {'matches' if ok else 'does not match'} {wanted!r}"}


def _goal(prompt: str) -> dict[str, Any]:
    return _goal_verdict(_blocks(prompt)[0] if _blocks(prompt) else "")


def _goal_verdict(transcript: str) -> dict[str, Any]:
    ok = "confirmation number" in transcript
    return {"verdict": "passed" if ok else "failed",
            "reasoning": "the agent confirmed a booking" if ok else "no booking was confirmed"}


def _topic(prompt: str) -> dict[str, Any]:
    current = re.search(r'currently in the topic "([^"]+)"', prompt)
    candidates = re.findall(r"^- ([\w-]+):", prompt, re.MULTILINE)
    exchange = _blocks(prompt)[-1] if _blocks(prompt) else ""
    return _topic_choice(current.group(1) if current else None, candidates, exchange)


def _topic_choice(current: str | None, candidates: list[str], exchange: str) -> dict[str, Any]:
    reply = _agent_reply(exchange)
    choice = current or (candidates[0] if candidates else "")
    if "?" in reply and len(candidates) > 1 and re.search(r"(?i)which city|how many|what date", reply):
        choice = next((c for c in candidates if "gather" in c), choice)
    return {"topic": choice, "reasoning": "by the content of the reply"}


def _blocks(prompt: str) -> list[str]:
    return _BLOCK.findall(prompt)


_JUDGE_AGENT_LINE = re.compile(r'^turn \d+ agent: ("(?:[^"\\]|\\.)*")$', re.MULTILINE)


def _agent_reply(exchange: str) -> str:
    """The last agent reply of a transcript as the judge reads it (``turn N agent: "..."``)."""
    lines = [json.loads(m) for m in _JUDGE_AGENT_LINE.findall(exchange)]
    if not lines:  # an older rendering (User: / Agent: lines)
        lines = [line[len("Agent: "):] for line in exchange.splitlines() if line.startswith("Agent: ")]
    return lines[-1] if lines else exchange


# -- in process: the same heuristics, answered by kind of call ---------------------------------------
#: What the summary and the experiment say about this judge and simulator.
DEMO_NOTE = "heuristic demo judge/simulator, not a real model: set GEMINI_API_KEY for a real one"


def demo_llm() -> FakeLLM:
    """The demo heuristics as an in-process LLM (``[tool.fabtest] offline_llm`` of this repository)."""

    def user(call: LLMCall) -> dict[str, Any]:
        turns = call.conversation.turns if call.conversation is not None else []
        if call.attack is not None:
            return _attack_reply(call.attack, call.tactic or "", len(turns))
        return _user_reply(call.goal or "", list(call.facts.values()), [t.response.text for t in turns])

    def criterion(call: LLMCall) -> tuple[str, str]:
        asked = call.criteria[0]  # a verdict function sees one criterion at a time
        ok, reason = _judge_criterion(asked.name, "" if asked.ad_hoc else asked.description, call.subject)
        return ("passed" if ok else "failed"), reason

    def grounding(call: LLMCall) -> dict[str, Any]:
        payload = [{"arguments": c.arguments, "result": c.result} for c in call.tool_calls]
        return _grounding_claims(call.response, json.dumps(payload, indent=2, ensure_ascii=False, default=str,
                                                           sort_keys=True))

    fake = FakeLLM(provider="demo", model="fabtest.demo.offline_llm", note=DEMO_NOTE)
    fake.simulated_user(user)
    fake.intents(default=lambda call: _intent_verdict(call.intent or "", call.subject))
    fake.goal_achieved(lambda call: _goal_verdict(call.subject))
    fake.topic(lambda call: _topic_choice(call.current_topic, list(call.candidates), call.subject))
    fake.grounded(default=grounding)
    fake.verdicts(default=criterion)
    from fabtest.demo.offline_agent_model import answer as agent_step

    fake.agent_model(agent_step)  # the built-in venue agent's model too (features/mcp_agent.feature)
    return fake


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
