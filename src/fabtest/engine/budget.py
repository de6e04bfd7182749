"""Cost and latency checks of one conversation (``the conversation must cost less than $0.05``,
``every response must take less than 3 seconds``).

Why here and not in the experiment: a budget is a property a scenario asserts while it runs, like
a turn limit, so it is recorded as a deterministic check (soft with ``should``, hard with ``must``)
and lands in the check counts and the gate like any other. The cost is priced as the experiment
prices it (experiment/cost.py: the default table plus ``[tool.fabtest.prices]``): the agent's
tokens by the model each turn names, the simulator's and the judge's by their configured models.
Judge verdicts still in flight when the step runs are not counted yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabtest.conversation import Status, TokenUsage, Turn
from fabtest.experiment.cost import Price, agent_turn_lines, find_price, usage_problem

__all__ = ["Outcome", "conversation_cost", "cost_outcome", "latency_outcome"]

#: (status, details, data) of a check
Outcome = tuple[Status, str, dict[str, Any]]


def conversation_cost(turns: Sequence[Turn], usage: Mapping[str, TokenUsage], role_models: Mapping[str, str | None],
                      prices: Mapping[str, Price]) -> tuple[float, list[str]]:
    """USD spent so far, and what makes it unknown: the models (or roles) whose tokens have no price,
    and the agent turns that reported a ``usage`` fabtest could not read (counting those as $0 would
    pass any budget)."""
    total, unpriced = 0.0, []

    def add(who: str, model: str | None, inp: int, out: int) -> None:
        nonlocal total
        if not (inp or out):
            return
        price = find_price(prices, model)
        if price is None:
            unpriced.append(f"{who} model {model!r}" if model else f"{who} (no model named)")
        else:
            total += price.usd(inp, out)

    for role, spent in usage.items():
        if role != "agent":
            add(role, role_models.get(role), spent.input_tokens, spent.output_tokens)
    for turn in turns:
        problem = usage_problem(turn.response.metadata)
        if problem:
            unpriced.append(f"{UNREADABLE} turn {turn.number}: {problem}")
            continue
        for model, _calls, inp, out in agent_turn_lines(turn.response.metadata):
            add("agent", model, inp, out)
    return total, sorted(set(unpriced))


#: how an agent turn whose ``usage`` could not be read is named among what makes the cost unknown
UNREADABLE = "the agent's usage could not be read at"


def cost_outcome(limit: float, spent: float, unpriced: list[str]) -> Outcome:
    """``cost < limit``; inconclusive when some tokens have no price (the cost is unknown)."""
    data: dict[str, Any] = {"max_usd": limit, "usd": round(spent, 8)}
    unread = [u for u in unpriced if u.startswith(UNREADABLE)]
    no_price = [u for u in unpriced if not u.startswith(UNREADABLE)]
    if unread:
        return ("inconclusive", f"cost unknown: {'; '.join(unread)} (token counts are finite numbers of 0 or more "
                                f"in metadata.usage); priced part ${spent:.6f}", data)
    if no_price:
        return ("inconclusive", f"cost unknown: no price for {', '.join(no_price)} (add it under "
                                f"[tool.fabtest.prices]); priced part ${spent:.6f}", data)
    ok = spent < limit
    return ("passed" if ok else "failed", f"the conversation cost ${spent:.6f} ({'under' if ok else 'not under'} "
                                          f"${limit:g})", data)


def latency_outcome(turns: Sequence[Turn], limit: float) -> Outcome:
    """Every given turn's response took less than ``limit`` seconds (the slowest named)."""
    slowest = max(turns, key=lambda t: t.duration_s)
    slow = [t.number for t in turns if t.duration_s >= limit]
    data = {"max_s": limit, "slowest_s": round(slowest.duration_s, 4), "slowest_turn": slowest.number}
    if slow:
        listed = ", ".join(map(str, slow[:10])) + (" ..." if len(slow) > 10 else "")
        return ("failed", f"{len(slow)} response(s) took {limit:g}s or more (turn {listed}); slowest: turn "
                          f"{slowest.number}, {slowest.duration_s:.2f}s", data)
    return ("passed", f"slowest response: turn {slowest.number}, {slowest.duration_s:.2f}s (under {limit:g}s)", data)
