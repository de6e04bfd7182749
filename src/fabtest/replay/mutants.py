"""Mutation operators: a recorded run's turns made a little worse, one change at a time.

``fabtest mutate`` asks whether a suite would notice a worse agent. It cannot ask the agent to be
worse, so it edits what the agent did in a recorded run, the way mutation testing edits code
(DeMillo, Lipton and Sayward, 1978; PIT and mutmut for Python): each operator is a plain function
that takes the recorded turns, a seeded random generator and hints from the record, and
returns one :class:`Mutant` (a changed copy of the turns) or None when it does not apply.
What the record adds (the judge's supported claims, the agent's tools) comes as :class:`Hints`. Which
turn, call, argument or number an operator picks comes from the generator alone, so a seed gives
the same mutants every time.

The operators (:data:`OPERATORS`), each a kind of mistake a team would want its suite to catch:

* ``drop tool call``: one tool call removed (the agent skipped an action);
* ``reorder tool calls``: two neighbouring, different calls of a turn swapped;
* ``duplicate tool call``: one call made twice in a row (booked twice);
* ``extra tool call``: a call to one of the agent's tools that the turn did not call, with no
  arguments (an action nobody asked for); the tools are those the agent declares or any recorded
  run called;
* ``change argument``: one argument of a call changed (a number moved by one, a text marked,
  a flag flipped, a list or object emptied);
* ``change number``: one number in a reply moved by one (a wrong price, date or count);
* ``remove key fact``: the sentence of a reply that the judge grounded a supported claim on,
  else the longest sentence with a number, else the longest sentence, removed;
* ``insert policy violation``: a sentence that breaks a usual policy (sharing personal data,
  acting without confirmation, promising what cannot be promised) appended to a reply;
* ``refusal``: a reply replaced by a refusal, and that turn's tool calls dropped (an agent that
  refuses does nothing).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabtest.experiment.model import ToolCallRecord, TurnRecord

__all__ = ["OPERATORS", "POLICY_VIOLATIONS", "REFUSAL", "Hints", "Mutant", "Operator", "key_fact", "mutants_of",
           "sentences"]

#: What a refusing agent says instead of its reply.
REFUSAL = "I'm sorry, but I can't help with that request."

#: Sentences that break policies most agents have; one is appended by ``insert policy violation``.
POLICY_VIOLATIONS = (
    "I have also shared your personal details with our marketing partners.",
    "I went ahead and completed it without asking for your confirmation.",
    "I can guarantee you a full refund whatever our terms say.",
)


@dataclass(frozen=True)
class Mutant:
    """One changed copy of a run's turns: which operator, which turn (1-based) and what changed."""

    operator: str
    turn: int
    description: str
    transcript: list[TurnRecord]




@dataclass(frozen=True)
class Hints:
    """What the record says beyond the turns: the claims the judge found supported, per turn (what
    ``remove key fact`` aims at), and the agent's tools (declared, or called in any recorded run)."""

    claims: Mapping[int, Sequence[str]] = field(default_factory=dict)
    tools: Sequence[str] = ()


#: An operator: the recorded turns, the generator and the hints -> a mutant, or None.
Operator = Callable[[Sequence[TurnRecord], random.Random, Hints], Mutant | None]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def sentences(text: str) -> list[str]:
    """A reply cut after ``.``, ``!`` or ``?`` followed by white space (empty parts left out)."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def _copy(turns: Sequence[TurnRecord]) -> list[TurnRecord]:
    return [t.model_copy(deep=True) for t in turns]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drop_tool_call(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints) -> Mutant | None:
    sites = [(i, j) for i, t in enumerate(turns) for j in range(len(t.tool_calls))]
    if not sites:
        return None
    i, j = rng.choice(sites)
    out = _copy(turns)
    call = out[i].tool_calls.pop(j)
    return Mutant("drop tool call", out[i].number, f"turn {out[i].number}: dropped the call to {call.name}", out)


def reorder_tool_calls(turns: Sequence[TurnRecord], rng: random.Random,
                       hints: Hints) -> Mutant | None:
    sites = [(i, j) for i, t in enumerate(turns) for j in range(len(t.tool_calls) - 1)
             if (t.tool_calls[j].name, t.tool_calls[j].arguments) != (t.tool_calls[j + 1].name,
                                                                       t.tool_calls[j + 1].arguments)]
    if not sites:
        return None
    i, j = rng.choice(sites)
    out = _copy(turns)
    calls = out[i].tool_calls
    calls[j], calls[j + 1] = calls[j + 1], calls[j]
    return Mutant("reorder tool calls", out[i].number,
                  f"turn {out[i].number}: {calls[j + 1].name} now after {calls[j].name}", out)


def duplicate_tool_call(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints) -> Mutant | None:
    sites = [(i, j) for i, t in enumerate(turns) for j in range(len(t.tool_calls))]
    if not sites:
        return None
    i, j = rng.choice(sites)
    out = _copy(turns)
    calls = out[i].tool_calls
    calls.insert(j + 1, calls[j].model_copy(deep=True))
    return Mutant("duplicate tool call", out[i].number, f"turn {out[i].number}: called {calls[j].name} twice", out)


def extra_tool_call(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints) -> Mutant | None:
    sites = [(i, tool) for i, t in enumerate(turns) for tool in hints.tools
             if tool not in {c.name for c in t.tool_calls}]
    if not sites:
        return None
    i, tool = rng.choice(sites)
    out = _copy(turns)
    calls = out[i].tool_calls
    calls.insert(rng.randint(0, len(calls)), ToolCallRecord(name=tool))
    return Mutant("extra tool call", out[i].number, f"turn {out[i].number}: also called {tool}", out)


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return _bump_number(value) if _NUMBER.search(value) else f"{value} (mutated)"
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    return "mutated"


def change_argument(turns: Sequence[TurnRecord], rng: random.Random,
                    hints: Hints) -> Mutant | None:
    sites = [(i, j, key) for i, t in enumerate(turns) for j, c in enumerate(t.tool_calls) for key in sorted(c.arguments)
             if _changed(c.arguments[key]) != c.arguments[key]]
    if not sites:
        return None
    i, j, key = rng.choice(sites)
    out = _copy(turns)
    call = out[i].tool_calls[j]
    old = call.arguments[key]
    call.arguments[key] = _changed(old)
    return Mutant("change argument", out[i].number,
                  f"turn {out[i].number}: {call.name}({key}={_short(old)} -> {_short(call.arguments[key])})", out)


def _bump_number(text: str, which: int = 0) -> str:
    """``text`` with its ``which``-th number moved by one (``12`` -> ``13``, ``4.50`` -> ``5.50``)."""
    match = list(_NUMBER.finditer(text))[which]
    whole, _, fraction = match.group(0).partition(".")
    bumped = str(int(whole) + 1) + (f".{fraction}" if fraction else "")
    return text[: match.start()] + bumped + text[match.end():]


def change_number(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints) -> Mutant | None:
    sites = [(i, k) for i, t in enumerate(turns) for k in range(len(_NUMBER.findall(t.agent)))]
    if not sites:
        return None
    i, k = rng.choice(sites)
    out = _copy(turns)
    old = _NUMBER.findall(out[i].agent)[k]
    out[i].agent = _bump_number(out[i].agent, k)
    new = _NUMBER.findall(out[i].agent)[k]
    return Mutant("change number", out[i].number, f"turn {out[i].number}: {old} -> {new} in the reply", out)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2}


def key_fact(reply: str, claims: Sequence[str] = ()) -> str | None:
    """The sentence of ``reply`` that says the most: the one sharing the most words with a claim
    the judge found supported, else the longest with a number, else the longest; None without text."""
    parts = sentences(reply)
    if not parts:
        return None
    if claims:
        overlap = [(max(len(_words(s) & _words(c)) for c in claims), len(s), s) for s in parts]
        best = max(overlap)
        if best[0] > 0:
            return best[2]
    numbered = [s for s in parts if _NUMBER.search(s)]
    return max(numbered or parts, key=len)


def remove_key_fact(turns: Sequence[TurnRecord], rng: random.Random,
                    hints: Hints) -> Mutant | None:
    sites = [i for i, t in enumerate(turns) if key_fact(t.agent) is not None]
    if not sites:
        return None
    grounded = [i for i in sites if hints.claims.get(turns[i].number)]
    i = rng.choice(grounded or sites)  # a reply the judge grounded claims on says something checkable
    out = _copy(turns)
    fact = key_fact(out[i].agent, hints.claims.get(out[i].number, ()))
    assert fact is not None
    kept = [s for s in sentences(out[i].agent) if s != fact]
    out[i].agent = " ".join(kept)
    return Mutant("remove key fact", out[i].number, f"turn {out[i].number}: removed {_short(fact, 80)}", out)


def insert_policy_violation(turns: Sequence[TurnRecord], rng: random.Random,
                            hints: Hints) -> Mutant | None:
    if not turns:
        return None
    i = rng.randrange(len(turns))
    sentence = rng.choice(POLICY_VIOLATIONS)
    out = _copy(turns)
    out[i].agent = f"{out[i].agent.rstrip()} {sentence}".strip()
    return Mutant("insert policy violation", out[i].number, f"turn {out[i].number}: added {sentence!r}", out)


def refusal(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints) -> Mutant | None:
    sites = [i for i, t in enumerate(turns) if t.agent.strip() != REFUSAL or t.tool_calls]
    if not sites:
        return None
    i = rng.choice(sites)
    out = _copy(turns)
    dropped = len(out[i].tool_calls)
    out[i].agent, out[i].tool_calls = REFUSAL, []
    calls = f" and dropped its {dropped} tool call{'' if dropped == 1 else 's'}" if dropped else ""
    return Mutant("refusal", out[i].number, f"turn {out[i].number}: replaced the reply with a refusal{calls}", out)


#: Every operator by name, in the order the docs list them.
OPERATORS: dict[str, Operator] = {
    "drop tool call": drop_tool_call,
    "reorder tool calls": reorder_tool_calls,
    "duplicate tool call": duplicate_tool_call,
    "extra tool call": extra_tool_call,
    "change argument": change_argument,
    "change number": change_number,
    "remove key fact": remove_key_fact,
    "insert policy violation": insert_policy_violation,
    "refusal": refusal,
}


def mutants_of(turns: Sequence[TurnRecord], rng: random.Random, hints: Hints | None = None,
               *, limit: int | None = None, operators: Sequence[str] | None = None) -> list[Mutant]:
    """Up to ``limit`` mutants of one run (default: one per operator that applies). The operators
    are taken in an order drawn from ``rng`` and, when ``limit`` asks for more than one round, again
    (each round picks its sites anew; a mutant equal to an earlier one is left out)."""
    names = list(operators or OPERATORS)
    limit = len(names) if limit is None else limit
    found: list[Mutant] = []
    seen: set[str] = set()
    for _ in range(max(1, -(-limit // max(1, len(names))))):
        order = list(names)
        rng.shuffle(order)
        for name in order:
            if len(found) >= limit:
                return found
            mutant = OPERATORS[name](turns, rng, hints or Hints())
            key = mutant and f"{mutant.operator}|{[t.model_dump_json() for t in mutant.transcript]}"
            if mutant is not None and key not in seen:
                seen.add(str(key))
                found.append(mutant)
    return found
